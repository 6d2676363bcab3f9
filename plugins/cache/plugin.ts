/**
 * cache: the response cache of config targets that set `cache: {mode: "simple", max_age}` (API.md §4).
 * Phases: onAttempt (priority 550: after virtual-key, rate-limit and budget admitted the attempt,
 * so a hit still counts as a request against rate limits; the last attempt hook before forward sends
 * it), onResponse and onChunk (capture the served attempt's reply), onLog (store it).
 * Reads `ctx.principal` (organisation and workspace), `ctx.routing.id`, `ctx.route`, `ctx.method`,
 * `ctx.path`, `ctx.query`, `ctx.headers`, per attempt `attempt.target` and `attempt.body` (or
 * `attempt.rawBody`); after the reply `ctx.attempt`, `ctx.outcome`, `ctx.status`, `ctx.error`.
 * Writes `attempt.cacheStatus` and `attempt.cacheKey`.
 * Per attempt: a target without `cache` → `DISABLED`, nothing else; so is every attempt without a
 * principal (auth off: there is no tenant to keep entries apart by). Otherwise the key (key.ts: the
 * tenant, config, target, request and normalised body; a body over `maxRequestBytes` → `DISABLED`)
 * is looked up: a hit → `HIT` and the stored reply is the attempt's reply (status, content type and
 * bytes; a streamed request stored Server-Sent Events and gets them back, ending as the original
 * did, `data: [DONE]` for the OpenAI formats); otherwise `MISS`, or `REFRESH` without a lookup when
 * `x-gateway-cache-force-refresh: true`, and the key is noted in `attempt.cacheKey`. Forward sends
 * `x-gateway-cache-status` from `attempt.cacheStatus`; forward, rate-limit and budget charge a
 * `HIT` nothing.
 * Capture, only for the served attempt (`ctx.attempt`) with a key: onResponse keeps a 2xx reply's
 * whole body (by reference), or opens a capture for an SSE stream that onChunk fills with each event
 * as the client gets it (events rewritten by plugins above this one are kept as this one saw them)
 * and abandons past `maxEntryBytes`; onLog stores it when the exchange completed (`ctx.outcome`
 * `completed`, no `ctx.error`, the status unchanged; an OpenAI-format stream only when it ended
 * with `[DONE]`). Never stored: errors, aborted or broken streams, replies over `maxEntryBytes`,
 * compressed bodies (`content-encoding`), non-SSE bodies forward relayed as a stream (no
 * `content-length` upstream). Only `content-type` is kept of the headers: the others (`x-gateway-*`
 * above all) belong to the request that stored it.
 * Cost: a request without a config never reaches onAttempt, and onResponse / onChunk / onLog return
 * after reading `ctx.attempt` (null); so does a config-routed request whose served attempt has no
 * key. `wantsChunks` answers false for every stream it is not capturing, so core relays those
 * streams' bytes untouched instead of parsing and re-serialising each event (about 1 µs per event).
 * I/O: per cached attempt one store lookup (Redis GET, or the in-process LRU); per stored reply one
 * write (Redis SET … EX max_age), enqueued in onLog, never awaited by the request; at most
 * `maxPendingWrites` in flight, more are dropped (counted).
 * Failure policy: the cache never fails a request. A store that cannot be reached (or answers too
 * late: `redisCommandTimeoutMs`) makes a lookup a miss and drops a write; both are counted
 * (`stats()`) and logged at warn (at most one line per 10 s, with the counts).
 */
import type { Attempt, RequestContext, SseEvent } from '../../core/context.js'
import type { GatewayPlugin, Reply } from '../../core/plugin.js'
import type { CachedResponse, ResponseCache } from '../../core/ports.js'
import type { Clock, Logger } from '../../core/service.js'
import type { CacheConfig } from './config.js'
import { responseCacheKey } from './key.js'

/** Failures are logged at most once per interval, with how many happened since. */
const FAILURE_LOG_INTERVAL_MS = 10_000
const FORCE_REFRESH_HEADER = 'x-gateway-cache-force-refresh'

export interface CacheStats {
  readonly hits: number
  readonly misses: number
  readonly refreshes: number
  /** Replies handed to the store. */
  readonly stored: number
  /** Lookups that failed (each served as a miss). */
  readonly lookupErrors: number
  readonly writeErrors: number
  /** Writes dropped because `maxPendingWrites` were in flight. */
  readonly writesDropped: number
}

/** A reply being captured for the store (one per served attempt with a key). */
interface Capture {
  readonly status: number
  readonly contentType: string
  /** A whole body, or the events of a stream so far (`null` once the stream passed the bound). */
  parts: Array<Uint8Array | string> | null
  bytes: number
  readonly stream: boolean
  /** The last event was `[DONE]`. */
  done: boolean
}

export class CachePlugin implements GatewayPlugin {
  readonly #config: CacheConfig
  readonly #cache: ResponseCache
  readonly #clock: Clock
  readonly #logger: Logger
  /** Keyed by the attempt, so nothing outlives the request even if onLog never came. */
  readonly #captures = new WeakMap<Attempt, Capture>()
  readonly #writes = new Set<Promise<void>>()
  #hits = 0
  #misses = 0
  #refreshes = 0
  #stored = 0
  #lookupErrors = 0
  #writeErrors = 0
  #writesDropped = 0
  #unloggedFailures = 0
  #nextFailureLog = 0

  constructor(config: CacheConfig, cache: ResponseCache, clock: Clock, logger: Logger) {
    this.#config = config
    this.#cache = cache
    this.#clock = clock
    this.#logger = logger
  }

  onAttempt(ctx: RequestContext, attempt: Attempt): Reply | undefined | Promise<Reply | undefined> {
    const setting = attempt.target.cache
    const routing = ctx.routing
    const principal = ctx.principal
    if (setting === null || routing === null || principal === null) {
      attempt.cacheStatus = 'DISABLED'
      return undefined
    }
    const rawBody = attempt.rawBody ?? ctx.rawBody
    if (rawBody !== null && rawBody.length > this.#config.maxRequestBytes) {
      attempt.cacheStatus = 'DISABLED'
      return undefined
    }
    const key = responseCacheKey({
      organisationId: principal.organisationId,
      workspaceId: principal.workspaceId,
      routingId: routing.id,
      target: attempt.target,
      routeId: ctx.route.id,
      method: ctx.method,
      path: ctx.path,
      query: ctx.query,
      headers: ctx.headers,
      body: attempt.body,
      rawBody,
    })
    attempt.cacheKey = key
    if (ctx.headers[FORCE_REFRESH_HEADER]?.trim().toLowerCase() === 'true') {
      attempt.cacheStatus = 'REFRESH'
      this.#refreshes++
      return undefined
    }
    return this.#lookup(attempt, key)
  }

  async #lookup(attempt: Attempt, key: string): Promise<Reply | undefined> {
    let found: CachedResponse | null
    try {
      found = await this.#cache.get(key)
    } catch (error) {
      this.#lookupErrors++
      this.#noteFailure('lookup', error)
      found = null
    }
    // Only 2xx replies are stored; anything else under the key is not ours to send.
    if (found === null || found.status < 200 || found.status > 299) {
      attempt.cacheStatus = 'MISS'
      this.#misses++
      return undefined
    }
    attempt.cacheStatus = 'HIT'
    attempt.cacheKey = null
    this.#hits++
    return { status: found.status, headers: found.headers, body: found.body }
  }

  onResponse(ctx: RequestContext, reply: Reply): undefined {
    const attempt = ctx.attempt
    if (attempt === null || attempt.cacheKey === null) return undefined
    const status = reply.status
    if (status < 200 || status > 299) return undefined
    let contentType = ''
    for (const [name, value] of reply.headers) {
      const lower = name.toLowerCase()
      if (lower === 'content-type') contentType = value
      // A compressed body would be replayed to clients that may not have asked for that encoding.
      else if (lower === 'content-encoding' && value.trim().toLowerCase() !== 'identity') return undefined
    }
    const body = reply.body
    if (body === null) return undefined
    if (typeof body === 'string' || body instanceof Uint8Array) {
      const bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : body
      if (bytes.byteLength > this.#config.maxEntryBytes) return undefined
      this.#captures.set(attempt, { status, contentType, parts: [bytes], bytes: bytes.byteLength, stream: false, done: false })
    } else if (body.sse) {
      this.#captures.set(attempt, { status, contentType, parts: [], bytes: 0, stream: true, done: false })
    }
    return undefined
  }

  /** Only a stream being captured for the cache needs its events; every other stream is relayed untouched. */
  wantsChunks(ctx: RequestContext): boolean {
    const attempt = ctx.attempt
    return attempt !== null && attempt.cacheKey !== null && this.#captures.has(attempt)
  }

  onChunk(ctx: RequestContext, event: SseEvent): SseEvent {
    const attempt = ctx.attempt
    if (attempt === null || attempt.cacheKey === null) return event
    const capture = this.#captures.get(attempt)
    if (capture === undefined || capture.parts === null) return event
    const text = serializeEvent(event)
    capture.bytes += Buffer.byteLength(text, 'utf8')
    if (capture.bytes > this.#config.maxEntryBytes) {
      capture.parts = null
      return event
    }
    capture.parts.push(text)
    capture.done = event.data === '[DONE]'
    return event
  }

  onLog(ctx: RequestContext): void {
    const attempt = ctx.attempt
    if (attempt === null || attempt.cacheKey === null) return
    const capture = this.#captures.get(attempt)
    if (capture === undefined) return
    this.#captures.delete(attempt)
    const setting = attempt.target.cache
    if (capture.parts === null || setting === null) return
    if (ctx.outcome !== 'completed' || ctx.error !== null || ctx.status !== capture.status) return
    // An OpenAI-format stream that ended without [DONE] may have been cut short.
    if (capture.stream && ctx.route.format === 'openai' && !capture.done) return
    const body = capture.stream ? Buffer.from((capture.parts as string[]).join(''), 'utf8') : (capture.parts[0] as Uint8Array)
    const headers: Array<readonly [string, string]> = capture.contentType === '' ? [] : [['content-type', capture.contentType]]
    this.#store(attempt.cacheKey, { status: capture.status, headers, body }, setting.maxAgeSeconds)
  }

  /** Waits for the writes in flight (shutdown), so replies served just before it are kept. */
  async close(): Promise<void> {
    await Promise.allSettled([...this.#writes])
  }

  stats(): CacheStats {
    return {
      hits: this.#hits,
      misses: this.#misses,
      refreshes: this.#refreshes,
      stored: this.#stored,
      lookupErrors: this.#lookupErrors,
      writeErrors: this.#writeErrors,
      writesDropped: this.#writesDropped,
    }
  }

  #store(key: string, value: CachedResponse, maxAgeSeconds: number): void {
    if (this.#writes.size >= this.#config.maxPendingWrites) {
      this.#writesDropped++
      this.#noteFailure('write', new Error(`${this.#writes.size} writes already waiting for the store`))
      return
    }
    this.#stored++
    let write: Promise<void>
    try {
      write = this.#cache.set(key, value, maxAgeSeconds).then(
        () => {},
        (error: unknown) => {
          this.#writeErrors++
          this.#noteFailure('write', error)
        },
      )
    } catch (error) {
      this.#writeErrors++
      this.#noteFailure('write', error)
      return
    }
    this.#writes.add(write)
    void write.finally(() => this.#writes.delete(write))
  }

  #noteFailure(operation: 'lookup' | 'write', error: unknown): void {
    const now = this.#clock.now()
    if (now < this.#nextFailureLog) {
      this.#unloggedFailures++
      return
    }
    this.#nextFailureLog = now + FAILURE_LOG_INTERVAL_MS
    const suppressed = this.#unloggedFailures
    this.#unloggedFailures = 0
    try {
      this.#logger.warn(
        {
          operation,
          error: error instanceof Error ? error.message : String(error),
          lookupErrors: this.#lookupErrors,
          writeErrors: this.#writeErrors,
          writesDropped: this.#writesDropped,
          suppressed,
        },
        operation === 'lookup' ? 'response cache lookup failed: served as a miss' : 'response cache write failed: reply not stored',
      )
    } catch {
      // A broken logger must not reach the request.
    }
  }
}

/** One event in wire form: its other lines, its `data` lines, a blank line. */
function serializeEvent(event: SseEvent): string {
  let text = ''
  const other = event.otherLines
  if (other !== undefined) for (const line of other) text += `${line}\n`
  const data = event.data
  if (data.indexOf('\n') < 0) return `${text}data: ${data}\n\n`
  for (const line of data.split('\n')) text += `data: ${line}\n`
  return `${text}\n`
}
