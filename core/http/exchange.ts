/**
 * `UwsExchange`: one request/response pair on uWebSockets.js.
 *
 * uWS rules kept here so nothing else has to: body chunks arrive only to a handler attached before
 * the request handler returns, and their ArrayBuffers are neutered afterwards (so they are copied);
 * the response must never be touched after `onAborted` fired or after it ended; every write made
 * after an `await` is corked; a write that hits backpressure pauses the source until `onWritable`.
 */
import { performance } from 'node:perf_hooks'
import type { HttpResponse } from 'uWebSockets.js'
import type { ClientAbort, RequestContext } from '../context.js'
import { ERRORS, GatewayError, gatewayError, toStreamErrorEvent } from '../errors.js'
import { errorReplyOf, type ClientExchange, type ErrorShape, type EventTransform } from '../pipeline.js'
import type { Reply, StreamBody } from '../plugin.js'
import { SseParser, serializeSseEvent } from './sse.js'
import { statusLine } from './status.js'

/** How much of the response body end `ctx.responseTail` keeps. */
const TAIL_BYTES = 16 * 1024

function bodyTooLarge(limit: number): GatewayError {
  return gatewayError(ERRORS.GW_REQ_BODY_TOO_LARGE, `The request body is larger than the limit of ${limit} bytes`)
}

export class UwsExchange implements ClientExchange {
  readonly #res: HttpResponse
  readonly #shape: ErrorShape
  #aborted = false
  #ended = false
  /** After an oversized body the connection is closed, since the rest of the body was not read. */
  #closeConnection = false
  #body: Promise<Buffer | GatewayError> = Promise.resolve(Buffer.alloc(0))
  #resolveBody: ((value: Buffer | GatewayError) => void) | null = null
  #onAbort: (() => void) | null = null

  constructor(res: HttpResponse, abort: ClientAbort, shape: ErrorShape) {
    this.#res = res
    this.#shape = shape
    res.onAborted(() => {
      this.#aborted = true
      abort.abort()
      this.#resolveBody?.(gatewayError(ERRORS.GW_REQ_INVALID, 'The client went away'))
      this.#onAbort?.()
    })
  }

  /**
   * Starts collecting the body. Must be called synchronously inside the uWS request handler.
   * @param declaredLength `content-length`, or `null` when absent (chunked or no body)
   * @param chunked whether the request uses chunked transfer encoding
   */
  startBody(limit: number, declaredLength: number | null, chunked: boolean): void {
    if (declaredLength !== null && declaredLength > limit) {
      this.#closeConnection = true
      this.#body = Promise.resolve(bodyTooLarge(limit))
      return
    }
    if (!chunked && (declaredLength === null || declaredLength === 0)) return
    this.#body = new Promise((resolve) => {
      this.#resolveBody = resolve
      let chunks: Buffer[] | null = null
      let size = 0
      let done = false
      this.#res.onData((chunk, isLast) => {
        if (done) return
        size += chunk.byteLength
        if (size > limit) {
          done = true
          this.#closeConnection = true
          this.#resolveBody = null
          resolve(bodyTooLarge(limit))
          return
        }
        // uWS neuters the ArrayBuffer when this callback returns: copy it.
        const copy = Buffer.from(new Uint8Array(chunk))
        if (isLast) {
          done = true
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
      this.#res.cork(() => {
        this.#writeHead(ctx, reply)
        // 204 and 304 carry neither a body nor a Content-Length (RFC 9110 §8.6); uWS end() adds one.
        if (body === null && (reply.status === 204 || reply.status === 304)) this.#res.endWithoutBody()
        else this.#res.end(body ?? undefined, this.#closeConnection)
      })
      this.#ended = true
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
   * Sends a reply produced outside any pipeline (404, 405, probes) inside the uWS handler.
   * No cork needed: uWS corks the handler's own synchronous writes.
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
          const errorReply = errorReplyOf(error, this.#shape)
          ctx.status = errorReply.status
          res.cork(() => {
            this.#writeHead(ctx, errorReply)
            res.end(errorReply.body as string, this.#closeConnection)
          })
        } else if (body.sse) {
          // API.md §2: one error event, then the stream ends without [DONE].
          res.cork(() => {
            res.write(toStreamErrorEvent(error))
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
