import { STATUS_CODES } from 'node:http'
import uWS from 'uWebSockets.js'
import type { HttpResponse } from 'uWebSockets.js'
import { Pool } from 'undici'
import type { Dispatcher } from 'undici'

// The baseline: the least work a Node proxy on uWS + undici can do to relay one request.
const port = Number(process.env.PORT ?? process.argv[2] ?? 0)
const upstream = process.env.UPSTREAM ?? process.argv[3] ?? 'http://127.0.0.1:8081'
const connections = Number(process.env.UPSTREAM_CONNECTIONS ?? 128)

const pool = new Pool(upstream, {
  connections,
  pipelining: 1,
  keepAliveTimeout: 60_000,
  keepAliveMaxTimeout: 600_000,
  headersTimeout: 30_000,
  bodyTimeout: 30_000
})

const statusLines = new Map<number, string>()
const statusLine = (code: number): string => {
  let line = statusLines.get(code)
  if (line === undefined) {
    line = `${code} ${STATUS_CODES[code] ?? 'Unknown'}`
    statusLines.set(code, line)
  }
  return line
}

type Exchange = {
  res: HttpResponse
  done: boolean
  controller: Dispatcher.DispatchController | null
  status: number
  contentType: string
  streaming: boolean
  headWritten: boolean
  parts: Buffer[]
}

const headerValue = (value: string | string[] | undefined): string =>
  value === undefined ? '' : Array.isArray(value) ? value.join(', ') : value

const fail = (ex: Exchange, err: Error): void => {
  if (ex.done) return
  ex.done = true
  if (ex.headWritten) {
    // Mid-stream there is no way to signal the error except cutting the connection.
    ex.res.close()
    return
  }
  const body = JSON.stringify({ error: { message: `upstream error: ${err.message}`, type: 'bad_gateway' } })
  ex.res.cork(() => {
    ex.res.writeStatus('502 Bad Gateway').writeHeader('content-type', 'application/json').end(body)
  })
}

const handlerFor = (ex: Exchange): Dispatcher.DispatchHandler => ({
  onRequestStart (controller) {
    ex.controller = controller
    if (ex.done) controller.abort(new Error('client aborted'))
  },
  onResponseStart (controller, statusCode, headers) {
    ex.controller = controller
    ex.status = statusCode
    ex.contentType = headerValue(headers['content-type'])
    ex.streaming = ex.contentType.startsWith('text/event-stream')
  },
  onResponseData (controller, chunk) {
    if (ex.done) return
    if (!ex.streaming) {
      ex.parts.push(chunk)
      return
    }
    const res = ex.res
    let ok = true
    res.cork(() => {
      if (!ex.headWritten) {
        ex.headWritten = true
        res.writeStatus(statusLine(ex.status))
        if (ex.contentType !== '') res.writeHeader('content-type', ex.contentType)
      }
      ok = res.write(chunk)
    })
    // uWS has buffered what it could not send; stop reading upstream until it drains.
    if (!ok) controller.pause()
  },
  onResponseEnd () {
    if (ex.done) return
    ex.done = true
    const res = ex.res
    res.cork(() => {
      if (!ex.headWritten) {
        ex.headWritten = true
        res.writeStatus(statusLine(ex.status))
        if (ex.contentType !== '') res.writeHeader('content-type', ex.contentType)
        const parts = ex.parts
        res.end(parts.length === 0 ? undefined : parts.length === 1 ? parts[0] : Buffer.concat(parts))
      } else {
        res.end()
      }
    })
  },
  onResponseError (_controller, err) {
    fail(ex, err)
  }
})

const app = uWS.App()

app.any('/*', (res, req) => {
  // The uWS request is only valid synchronously, so copy what the upstream call needs now.
  const method = req.getCaseSensitiveMethod()
  const query = req.getQuery()
  const path = query ? `${req.getUrl()}?${query}` : req.getUrl()
  const headers: Record<string, string> = {}
  const contentType = req.getHeader('content-type')
  if (contentType) headers['content-type'] = contentType
  const authorization = req.getHeader('authorization')
  if (authorization) headers.authorization = authorization

  const ex: Exchange = {
    res,
    done: false,
    controller: null,
    status: 0,
    contentType: '',
    streaming: false,
    headWritten: false,
    parts: []
  }
  res.onAborted(() => {
    ex.done = true
    ex.controller?.abort(new Error('client aborted'))
  })
  res.onWritable(() => {
    if (!ex.done) ex.controller?.resume()
    return true
  })

  const send = (body: Buffer | null): void => {
    if (ex.done) return
    pool.dispatch({ origin: upstream, method: method as Dispatcher.HttpMethod, path, headers, body }, handlerFor(ex))
  }

  if (method === 'GET' || method === 'HEAD') {
    send(null)
    return
  }
  const parts: Buffer[] = []
  res.onData((chunk, isLast) => {
    // uWS neuters the ArrayBuffer when this callback returns, so it must be copied.
    parts.push(Buffer.from(new Uint8Array(chunk)))
    if (isLast) send(parts.length === 1 ? parts[0]! : Buffer.concat(parts))
  })
})

app.listen('127.0.0.1', port, (listenSocket) => {
  if (!listenSocket) {
    process.stderr.write(`bare-forwarder: cannot listen on port ${port}\n`)
    process.exit(1)
  }
  process.stdout.write(`READY ${uWS.us_socket_local_port(listenSocket)}\n`)
})

const stop = (): void => {
  void pool.destroy().finally(() => process.exit(0))
  setTimeout(() => process.exit(0), 500).unref()
}
process.on('SIGTERM', stop)
process.on('SIGINT', stop)
