/**
 * A TCP proxy in front of a real service, for fault tests: `up` forwards, `down` refuses every
 * connection (and cuts open ones), `lose-insert-responses` forwards requests but cuts the
 * connection instead of returning the answer to an HTTP request whose first bytes name an INSERT
 * (the service did the work; the client only sees a failure).
 */
import { connect, createServer, type AddressInfo, type Socket } from 'node:net'

export type ProxyMode = 'up' | 'down' | 'lose-insert-responses'

export interface FaultProxy {
  readonly url: string
  mode: ProxyMode
  /** HTTP requests whose query is an INSERT that went through (in every mode but `down`). */
  readonly inserts: number
  close(): Promise<void>
}

export async function startFaultProxy(target: URL): Promise<FaultProxy> {
  const sockets = new Set<Socket>()
  let mode: ProxyMode = 'up'
  let inserts = 0
  const server = createServer((client) => {
    sockets.add(client)
    client.on('close', () => sockets.delete(client))
    client.on('error', () => undefined)
    if (mode === 'down') {
      client.destroy()
      return
    }
    const upstream = connect({ host: target.hostname, port: Number(target.port) })
    sockets.add(upstream)
    upstream.on('close', () => {
      sockets.delete(upstream)
      client.destroy()
    })
    upstream.on('error', () => client.destroy())
    client.on('close', () => upstream.destroy())
    let loseAnswer = false
    client.on('data', (chunk: Buffer) => {
      const head = chunk.subarray(0, 512).toString('latin1')
      if (/^POST [^ ]*query=INSERT/i.test(head)) {
        inserts++
        if (mode === 'lose-insert-responses') loseAnswer = true
      }
      upstream.write(chunk)
    })
    upstream.on('data', (chunk: Buffer) => {
      if (loseAnswer) {
        client.destroy()
        upstream.destroy()
        return
      }
      client.write(chunk)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as AddressInfo).port
  return {
    url: `http://127.0.0.1:${port}`,
    get mode() {
      return mode
    },
    get inserts() {
      return inserts
    },
    set mode(next: ProxyMode) {
      mode = next
      if (next === 'down') for (const socket of sockets) socket.destroy()
    },
    async close() {
      for (const socket of sockets) socket.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
