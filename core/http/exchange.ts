/**
 * `UwsExchange`: one request/response pair on uWebSockets.js.
 *
 * uWS rules kept here so nothing else has to: body chunks arrive only to a handler attached before
 * the request handler returns, and their ArrayBuffers are neutered afterwards (so they are copied);
 * the response must never be touched after `onAborted` fired or after it ended; every write made
 * after an `await` is corked; a write that hits backpressure pauses the source until `onWritable`.
 *
 * Lingering close: a reply to a request whose body was refused as too large goes out while the
 * client may still be sending that body. Closing at once would make the kernel answer the unread
 * bytes with a reset, and a client that reads only after sending (or whose TCP stack drops the
 * received reply on the reset) sees a broken pipe instead of the 413. So the reply is written
 * (chunked, not ended) and the rest of the body is read and discarded; the reply ends once the body
 * is complete (the connection stays usable), or the connection is closed after `LINGER_MS` or
 * `LINGER_BYTES`, whichever comes first. uWS cannot close a connection after `end()`, and its own
 * `end(body, true)` closes with the body unread, hence the unended reply.
 */
import { performance } from 'node:perf_hooks'
import type { HttpResponse } from 'uWebSockets.js'
import type { ClientAbort, RequestContext } from '../context.js'
import { ERRORS, GatewayError, gatewayError, toStreamErrorEvent } from '../errors.js'
import { errorReplyOf, type ClientExchange, type ErrorShape, type EventTransform } from '../pipeline.js'
import type { Reply, StreamBody } from '../plugin.js'
import { eventSeparatorAfter, nextSequenceNumber, serializeSseEvent, SseParser } from './sse.js'
import { statusLine } from './status.js'

/** How much of the response body end `ctx.responseTail` keeps. */
const TAIL_BYTES = 16 * 1024
/** Lingering close: how long, and how many more body bytes, after the reply to an oversized body. */
const LINGER_MS = 2_000
const LINGER_BYTES = 64 * 1024 * 1024

function bodyTooLarge(limit: number): GatewayError {
  return gatewayError(ERRORS.GW_REQ_BODY_TOO_LARGE, `The request body is larger than the limit of ${limit} bytes`)
}

export class UwsExchange implements ClientExchange {
  readonly #res: HttpResponse
  readonly #shape: ErrorShape
  #aborted = false
  #ended = false
  /** The request body was refused as too large; what still arrives of it is discarded. */
  #refused = false
  /** Every byte of the request body has arrived (true when there is none). */
  #bodyComplete = true
  /** Lingering close in progress: the reply is written but not ended (see the file comment). */
  #lingerTimer: NodeJS.Timeout | null = null
  #lingerBytes = 0
  #body: Promise<Buffer | GatewayError> = Promise.resolve(Buffer.alloc(0))
  #resolveBody: ((value: Buffer | GatewayError) => void) | null = null
  #onAbort: (() => void) | null = null

  constructor(res: HttpResponse, abort: ClientAbort, shape: ErrorShape) {
    this.#res = res
    this.#shape = shape
    res.onAborted(() => {
      this.#aborted = true
      this.#stopLinger()
      abort.abort()
      this.#resolveBody?.(gatewayError(ERRORS.GW_REQ_INVALID, 'The client went away'))
      this.#onAbort?.()
    })
  }

  /** Close the connection after the reply: only while a refused body is still arriving. */
  get #closeConnection(): boolean {
    return this.#refused && !this.#bodyComplete
  }

  /**
   * Starts collecting the body. Must be called synchronously inside the uWS request handler.
   * @param declaredLength `content-length`, or `null` when absent (chunked or no body)
   * @param chunked whether the request uses chunked transfer encoding
   */
  startBody(limit: number, declaredLength: number | null, chunked: boolean): void {
    if (declaredLength !== null && declaredLength > limit) {
      this.#refused = true
      this.#bodyComplete = false
      this.#body = Promise.resolve(bodyTooLarge(limit))
      // Read (and drop) what follows, so the reply can linger until the client stops sending.
      this.#res.onData((chunk, isLast) => this.#discarded(chunk.byteLength, isLast))
      return
    }
    if (!chunked && (declaredLength === null || declaredLength === 0)) return
    this.#bodyComplete = false
    this.#body = new Promise((resolve) => {
      this.#resolveBody = resolve
      let chunks: Buffer[] | null = null
      let size = 0
      let done = false
      this.#res.onData((chunk, isLast) => {
        if (done) {
          this.#discarded(chunk.byteLength, isLast)
          return
        }
        size += chunk.byteLength
        if (size > limit) {
          done = true
          this.#refused = true
          this.#resolveBody = null
          resolve(bodyTooLarge(limit))
          this.#discarded(0, isLast)
          return
        }
        // uWS neuters the ArrayBuffer when this callback returns: copy it.
        const copy = Buffer.from(new Uint8Array(chunk))
        if (isLast) {
          done = true
          this.#bodyComplete = true
          this.#resolveBody = null
          resolve(chunks === null ? copy : Buffer.concat([...chunks, copy], size))
        } else {
          ;(chunks ??= []).push(copy)
        }
      })
    })
  }

  readBody(): Promise<Buffer | GatewayError> {
    return this.#body
  }

  send(ctx: RequestContext, reply: Reply, transform: EventTransform | null): Promise<void> | undefined {
    const body = reply.body
    if (this.#aborted || this.#ended) {
      if (body !== null && typeof body === 'object' && 'source' in body) body.source.destroy()
      this.#finish(ctx, 'aborted')
      return undefined
    }
    ctx.status = reply.status
    if (body === null || typeof body === 'string' || body instanceof Uint8Array) {
      const linger = this.#closeConnection && body !== null && body.length > 0
      this.#res.cork(() => {
        this.#writeHead(ctx, reply)
        // 204 and 304 carry neither a body nor a Content-Length (RFC 9110 §8.6); uWS end() adds one.
        if (body === null && (reply.status === 204 || reply.status === 304)) this.#res.endWithoutBody()
        else if (linger) this.#res.write(body)
        else this.#res.end(body ?? undefined, this.#closeConnection)
      })
      this.#ended = true
      if (linger) this.#startLinger()
      ctx.firstByteAt = performance.now()
      // No copy: the exchange is over, and the pipeline drops the tail once onLog has read it.
      if (body instanceof Uint8Array) {
        ctx.responseTail = endOf(body)
        ctx.responseTailCut = body.byteLength > TAIL_BYTES
      }
      this.#finish(ctx, ctx.error === null ? 'completed' : 'errored')
      return undefined
    }
    return this.#relay(ctx, reply, body, transform)
  }

  /**
   * Sends a probe reply (`/readyz`, `/metrics`) produced outside any pipeline, once its promise
   * settled (so after the uWS handler returned: the writes are corked here).
   */
  sendSimple(status: number, headers: ReadonlyArray<readonly [string, string]>, body: string, traceId: string): void {
    if (this.#aborted || this.#ended) return
    this.#ended = true
    this.#res.cork(() => {
      this.#res.writeStatus(statusLine(status))
      for (const [name, value] of headers) this.#res.writeHeader(name, value)
      this.#res.writeHeader('x-gateway-trace-id', traceId)
      this.#res.end(body, this.#closeConnection)
    })
  }

  /** Body bytes that arrive after the body was refused: dropped, and counted while the reply lingers. */
  #discarded(bytes: number, isLast: boolean): void {
    if (isLast) {
      this.#bodyComplete = true
      // The client sent it all: the reply can end normally and the connection stay open.
      if (this.#lingerTimer !== null) {
        this.#stopLinger()
        if (!this.#aborted) this.#res.cork(() => this.#res.end())
      }
      return
    }
    if (this.#lingerTimer === null) return
    this.#lingerBytes += bytes
    if (this.#lingerBytes > LINGER_BYTES) this.#closeLingering()
  }

  #startLinger(): void {
    this.#lingerTimer = setTimeout(() => this.#closeLingering(), LINGER_MS)
    this.#lingerTimer.unref()
  }

  /** The linger bound passed with the body still arriving: close (uWS cannot once the reply ended). */
  #closeLingering(): void {
    this.#stopLinger()
    if (!this.#aborted) this.#res.close()
  }

  #stopLinger(): void {
    if (this.#lingerTimer === null) return
    clearTimeout(this.#lingerTimer)
    this.#lingerTimer = null
  }

  #writeHead(ctx: RequestContext, reply: Reply): void {
    const res = this.#res
    res.writeStatus(statusLine(reply.status))
    for (const [name, value] of reply.headers) res.writeHeader(name, value)
    res.writeHeader('x-gateway-trace-id', ctx.traceId)
    if (ctx.target !== null) res.writeHeader('x-gateway-provider', ctx.target.provider)
  }

  #finish(ctx: RequestContext, outcome: 'completed' | 'errored' | 'aborted'): void {
    ctx.endedAt = performance.now()
    ctx.outcome = this.#aborted ? 'aborted' : outcome
  }

  #relay(ctx: RequestContext, reply: Reply, body: StreamBody, transform: EventTransform | null): Promise<void> {
    const res = this.#res
    const source = body.source
    const parser = transform !== null && body.sse ? new SseParser() : null
    let started = false
    let previous: Buffer | null = null
    let last: Buffer | null = null
    let received = 0

    return new Promise((resolve) => {
      let settled = false
      const settle = (outcome: 'completed' | 'errored' | 'aborted'): void => {
        if (settled) return
        settled = true
        this.#onAbort = null
        ctx.responseTail = tailOf(previous, last)
        ctx.responseTailCut = received > (ctx.responseTail?.length ?? 0)
        this.#finish(ctx, outcome)
        resolve()
      }
      const startIfNeeded = (): void => {
        if (started) return
        started = true
        ctx.firstByteAt = performance.now()
        this.#writeHead(ctx, reply)
      }
      this.#onAbort = () => {
        source.destroy()
        settle('aborted')
      }
      const resume = (): boolean => {
        source.resume()
        return true
      }

      const onData = (chunk: Buffer): void => {
        if (this.#aborted) return
        previous = last
        last = chunk
        received += chunk.length
        const out = parser === null ? chunk : transformed(ctx, parser.push(chunk), transform as EventTransform)
        if (out.length === 0) return
        let writable = true
        res.cork(() => {
          startIfNeeded()
          writable = res.write(out)
        })
        if (!writable) {
          // uWS buffered what the client could not take yet: stop reading upstream until it drains.
          source.pause()
          res.onWritable(resume)
        }
      }
      const onEnd = (): void => {
        if (this.#aborted) return settle('aborted')
        const rest = parser === null ? '' : transformed(ctx, parser.end(), transform as EventTransform)
        res.cork(() => {
          startIfNeeded()
          if (rest.length > 0) res.write(rest)
          res.end(undefined, this.#closeConnection)
        })
        this.#ended = true
        settle(ctx.error === null ? 'completed' : 'errored')
      }
      const onError = (cause: unknown): void => {
        if (this.#aborted) return settle('aborted')
        const error = body.toError(cause)
        ctx.error = error
        if (!started) {
          // Nothing was sent yet: the client gets an ordinary error reply.
          const errorReply = errorReplyOf(error, this.#shape, ctx.route.format)
          ctx.status = errorReply.status
          res.cork(() => {
            this.#writeHead(ctx, errorReply)
            res.end(errorReply.body as string, this.#closeConnection)
          })
        } else if (body.sse) {
          // API.md §2: one error event in the route's stream format, then the stream ends (no
          // [DONE]). Relayed bytes may stop inside an event: close it first, so the error event
          // stands alone (transformed output always ends on an event boundary).
          const format = ctx.route.format
          const separator = parser === null ? eventSeparatorAfter(last) : ''
          const sequence = format === 'responses' ? nextSequenceNumber(previous, last) : 0
          res.cork(() => {
            res.write(separator + toStreamErrorEvent(error, format, sequence))
            res.end(undefined, this.#closeConnection)
          })
        } else {
          // A plain body cannot carry an error after it started: cut the connection so the
          // client sees a truncated response rather than a silently short one.
          this.#onAbort = null
          res.close()
        }
        this.#ended = true
        settle('errored')
      }
      source.consume(onData, onEnd, onError)
    })
  }
}

function transformed(ctx: RequestContext, events: ReturnType<SseParser['push']>, transform: EventTransform): string {
  let out = ''
  for (const event of events) {
    const result = transform(ctx, event)
    if (result !== null) out += serializeSseEvent(result, event.otherLines)
  }
  return out
}

/** The last `TAIL_BYTES` of a whole body, as a view on it. */
function endOf(body: Uint8Array): Buffer {
  const start = Math.max(0, body.byteLength - TAIL_BYTES)
  return Buffer.from(body.buffer, body.byteOffset + start, body.byteLength - start)
}

/**
 * The last `TAIL_BYTES` of a streamed body, always as a fresh copy: the chunks are slices of the socket's
 * read buffers, and keeping a slice alive keeps its whole backing store alive (measured: retaining
 * them made V8 run a full mark-compact every ~0.4 s under streaming load).
 */
function tailOf(previous: Buffer | null, last: Buffer | null): Buffer | null {
  if (last === null) return null
  const fromLast = Math.min(last.length, TAIL_BYTES)
  const fromPrevious = previous === null ? 0 : Math.min(previous.length, TAIL_BYTES - fromLast)
  const tail = Buffer.allocUnsafeSlow(fromPrevious + fromLast)
  if (previous !== null && fromPrevious > 0) previous.copy(tail, 0, previous.length - fromPrevious)
  last.copy(tail, fromPrevious, last.length - fromLast)
  return tail
}
