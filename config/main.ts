/**
 * Process entry: start the gateway, stop it gracefully on SIGTERM/SIGINT.
 *
 * Two process-wide settings come first, before the HTTP server library is loaded:
 * - umask 077: every file the process creates is private to its owner. The gateway creates its own
 *   files with explicit modes, but DuckDB creates its write-ahead log (again after every checkpoint)
 *   and spill files itself, with the umask.
 * - `UWS_HTTP_MAX_HEADERS_SIZE`, unless the operator set it: newer uWebSockets.js builds read it
 *   once, when the library loads, as their header block limit (default 4 KB), so a swapped-in
 *   official build refuses at the gateway's own 16 KB. The bundled 20.30 build does not read it.
 */
import type { GatewayHandle } from './boot.js'

process.umask(0o077)
process.env.UWS_HTTP_MAX_HEADERS_SIZE ??= '16384'

const { ConfigError } = await import('../core/registry.js')
const { startGateway } = await import('./boot.js')

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
