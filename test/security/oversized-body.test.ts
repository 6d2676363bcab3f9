/**
 * Oversized request bodies, attacker-style: the gateway answers 413 while the client is still
 * sending, then reads and drops the rest only for a bounded time and amount (lingering close,
 * core/http/exchange.ts), so a client that never stops sending cannot hold a connection or make the
 * gateway read without end. Real gateway, raw sockets.
 */
import { connect, type Socket } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CHAT_BODY, dataPlaneHeaders, startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { startMockUpstream, type MockUpstream } from '../helpers/mock-upstream.js'

let mock: MockUpstream
let gw: TestGateway
let key: string
let port: number

beforeAll(async () => {
  mock = await startMockUpstream()
  gw = await startTestGateway()
  key = (await gw.workspaceKey(['completions.write'])).key
  port = Number(new URL(gw.url).port)
})

afterAll(async () => {
  await gw?.close()
  await mock?.close()
})

function head(framing: string): string {
  const headers = dataPlaneHeaders(key, mock.url)
  let text = `POST /v1/chat/completions HTTP/1.1\r\nhost: gateway\r\n${framing}\r\n`
  for (const [name, value] of Object.entries(headers)) text += `${name}: ${value}\r\n`
  return `${text}\r\n`
}

interface Sender {
  readonly socket: Socket
  /** Everything read so far. */
  received(): string
  /** Body bytes written so far. */
  sent(): number
  /** Resolves when the gateway closed the connection (or it failed), with the bytes sent until then. */
  readonly closed: Promise<number>
}

/** Writes `head`, then body bytes from `chunk` over and over (`pauseMs` between writes) until the connection ends. */
function sendForever(text: string, chunk: Buffer, pauseMs: number): Sender {
  const socket = connect(port, '127.0.0.1')
  let received = ''
  let sent = 0
  let open = true
  socket.on('data', (data: Buffer) => {
    received += data.toString('latin1')
  })
  const closed = new Promise<number>((resolve) => {
    const done = (): void => {
      open = false
      resolve(sent)
    }
    socket.on('error', done)
    socket.on('close', done)
  })
  socket.once('connect', async () => {
    socket.write(text)
    while (open) {
      const flushed = socket.write(chunk)
      sent += chunk.length
      if (!flushed) await new Promise((resume) => (socket.once('drain', resume), socket.once('close', resume)))
      if (pauseMs > 0) await new Promise((resume) => setTimeout(resume, pauseMs))
    }
  })
  return { socket, received: () => received, sent: () => sent, closed }
}

async function expectServing(): Promise<void> {
  const response = await fetch(`${gw.url}/v1/chat/completions`, { method: 'POST', headers: dataPlaneHeaders(key, mock.url), body: JSON.stringify(CHAT_BODY) })
  expect(response.status).toBe(200)
  await response.text()
}

describe('a client that keeps sending an oversized body', () => {
  it('reads the 413 while still sending a trickle, and is disconnected instead of held', async () => {
    // Declares 900 MB (uWS itself drops a declared length of 10 digits or more), sends 1 KiB every 20 ms: it would take days.
    const sender = sendForever(head('content-length: 900000000'), Buffer.alloc(1024, 0x61), 20)
    const sent = await sender.closed
    expect(sender.received()).toMatch(/^HTTP\/1\.1 413 /)
    expect(sender.received()).toContain('"code":"GW_REQ_BODY_TOO_LARGE"')
    expect(sent).toBeLessThan(900_000_000)
    await expectServing()
  })

  it('reads the 413 while sending as fast as it can, and the gateway stops reading after a bounded amount', async () => {
    const sender = sendForever(head('transfer-encoding: chunked'), Buffer.concat([Buffer.from('100000\r\n'), Buffer.alloc(0x100000, 0x62), Buffer.from('\r\n')]), 0)
    const sent = await sender.closed
    expect(sender.received()).toMatch(/^HTTP\/1\.1 413 /)
    expect(sender.received()).toContain('"code":"GW_REQ_BODY_TOO_LARGE"')
    // The JSON limit (10 MiB) + at most 64 MiB drained + what sat in socket buffers: far below "forever".
    expect(sent).toBeLessThan(160 * 1024 * 1024)
    await expectServing()
  })
})
