/** Process entry: start the gateway, stop it gracefully on SIGTERM/SIGINT. */
import { ConfigError } from '../core/registry.js'
import { startGateway, type GatewayHandle } from './boot.js'

let gateway: GatewayHandle
try {
  gateway = await startGateway()
} catch (error) {
  if (error instanceof ConfigError) process.stderr.write(`Configuration error: ${error.message}\n`)
  else process.stderr.write(`The gateway failed to start: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`)
  process.exit(1)
}

process.stdout.write(`Gateway listening on http://localhost:${gateway.port}\n`)

let signalled = false
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    if (signalled) return
    signalled = true
    gateway.stop().then(
      () => process.exit(0),
      (error: unknown) => {
        process.stderr.write(`Shutdown failed: ${String(error)}\n`)
        process.exit(1)
      },
    )
  })
}
