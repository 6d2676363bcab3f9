import uWS from 'uWebSockets.js'
import type { HttpResponse } from 'uWebSockets.js'

const port = Number(process.env.PORT ?? process.argv[2] ?? 0)
const chunkCount = Math.max(0, Number(process.env.MOCK_CHUNKS ?? 20))
const chunkDelayMs = Math.max(0, Number(process.env.MOCK_CHUNK_DELAY_MS ?? 0))
const latencyMs = Math.max(0, Number(process.env.MOCK_LATENCY_MS ?? 0))

const model = 'gpt-4o-mini'
const created = 1_700_000_000
const words = ['Hello', ' there', '!', ' How', ' can', ' I', ' help', ' you', ' today', '?']
const completionText = Array.from({ length: Math.max(1, chunkCount) }, (_, i) => words[i % words.length]).join('')
const usage = { prompt_tokens: 9, completion_tokens: Math.max(1, chunkCount), total_tokens: 9 + Math.max(1, chunkCount) }

// Everything is serialised once at boot so the mock spends its CPU on I/O only.
const completionBody = Buffer.from(JSON.stringify({
  id: 'chatcmpl-bench',
  object: 'chat.completion',
  created,
  model,
  system_fingerprint: 'fp_bench',
  choices: [{ index: 0, message: { role: 'assistant', content: completionText, refusal: null }, logprobs: null, finish_reason: 'stop' }],
  usage
}))

const sseEvent = (payload: unknown): Buffer => Buffer.from(`data: ${JSON.stringify(payload)}\n\n`)
const chunkBase = { id: 'chatcmpl-bench', object: 'chat.completion.chunk', created, model, system_fingerprint: 'fp_bench' }
const streamEvents: Buffer[] = []
for (let i = 0; i < chunkCount; i++) {
  const delta = i === 0 ? { role: 'assistant', content: words[0] } : { content: words[i % words.length] }
  const finish = i === chunkCount - 1 ? 'stop' : null
  streamEvents.push(sseEvent({ ...chunkBase, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] }))
}
streamEvents.push(sseEvent({ ...chunkBase, choices: [], usage }))
streamEvents.push(Buffer.from('data: [DONE]\n\n'))

const streamMarkers = [Buffer.from('"stream":true'), Buffer.from('"stream": true')]
const isStreamRequest = (body: Buffer): boolean => streamMarkers.some((m) => body.includes(m))

type Reply = { aborted: boolean }

const sendJson = (res: HttpResponse, state: Reply): void => {
  if (state.aborted) return
  res.cork(() => {
    res.writeStatus('200 OK').writeHeader('content-type', 'application/json').end(completionBody)
  })
}

const sendStream = (res: HttpResponse, state: Reply): void => {
  if (state.aborted) return
  let next = 0
  let waitingWritable = false

  const writeNext = (): boolean => {
    let ok = true
    res.cork(() => {
      if (next === 0) {
        res.writeStatus('200 OK').writeHeader('content-type', 'text/event-stream').writeHeader('cache-control', 'no-cache')
      }
      const event = streamEvents[next++]
      if (event !== undefined) ok = res.write(event)
      // A failed write can run onAborted synchronously; the response is gone then.
      if (next === streamEvents.length && !state.aborted) res.end()
    })
    return ok
  }

  const pump = (): void => {
    if (state.aborted || waitingWritable) return
    while (next < streamEvents.length) {
      const ok = writeNext()
      if (next === streamEvents.length || state.aborted) return
      if (!ok) {
        // uWS keeps the unsent bytes; wait for the socket to drain before producing more.
        waitingWritable = true
        return
      }
      if (chunkDelayMs > 0) {
        setTimeout(pump, chunkDelayMs)
        return
      }
    }
  }

  res.onWritable(() => {
    if (waitingWritable) {
      waitingWritable = false
      if (chunkDelayMs > 0) setTimeout(pump, chunkDelayMs)
      else pump()
    }
    return true
  })
  // uWS corks the socket for the whole onData callback, which would merge every event into one send;
  // starting on the next turn makes each event its own send, as a real token stream arrives.
  setImmediate(pump)
}

const app = uWS.App()

app.post('/v1/chat/completions', (res) => {
  const state: Reply = { aborted: false }
  res.onAborted(() => { state.aborted = true })
  const parts: Buffer[] = []
  res.onData((chunk, isLast) => {
    // uWS neuters the ArrayBuffer when this callback returns, so it must be copied.
    parts.push(Buffer.from(new Uint8Array(chunk)))
    if (!isLast) return
    const body = parts.length === 1 ? parts[0]! : Buffer.concat(parts)
    const reply = isStreamRequest(body) ? sendStream : sendJson
    if (latencyMs > 0) setTimeout(() => reply(res, state), latencyMs)
    else reply(res, state)
  })
})

app.get('/healthz', (res) => {
  res.end('ok')
})

app.any('/*', (res) => {
  res.writeStatus('404 Not Found').writeHeader('content-type', 'application/json').end('{"error":{"message":"not found"}}')
})

app.listen('127.0.0.1', port, (listenSocket) => {
  if (!listenSocket) {
    process.stderr.write(`mock-upstream: cannot listen on port ${port}\n`)
    process.exit(1)
  }
  process.stdout.write(`READY ${uWS.us_socket_local_port(listenSocket)}\n`)
})

const stop = (): void => process.exit(0)
process.on('SIGTERM', stop)
process.on('SIGINT', stop)
