/**
 * `UndiciUpstreamClient`: sends requests to providers over undici 7 pools, one `Pool` per origin
 * (created on first use), keep-alive, bounded connections, streaming response bodies.
 *
 * Timeouts:
 * - `requestTimeoutMs` on a request (from `x-gateway-request-timeout` or a config): response headers
 *   must arrive within it, counted from `send`, or the upstream call is aborted → 408
 *   `GW_UPSTREAM_REQUEST_TIMEOUT`;
 * - the gateway's own connect/headers timeouts → 504 `GW_UPSTREAM_TIMEOUT`;
 * - the body idle timeout: the request's `idleTimeoutMs` (passed to undici as the request's
 *   `bodyTimeout`, so it costs no timer of ours: undici refreshes its own per-connection timer on
 *   every chunk and does not fire while the body is paused for backpressure), else `bodyTimeoutMs`.
 *   On expiry undici destroys the connection (the provider sees the request go) and the body
 *   stream fails; `toError` maps it to 408 when the request carried its own timeout, else 504.
 *
 * Errors handed out are `GatewayError`s with the catalogue's client-safe message; the driver error
 * is kept as `cause` (it may name hosts or carry other detail that must not reach clients).
 *
 * Every connection's DNS answer passes `isAddressAllowed` (default: no link-local or cloud-metadata
 * address), so a host name that re-resolves to a metadata address after the custom-host check
 * (DNS rebinding) still cannot be reached.
 */
import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns'
import { Pool, type Dispatcher } from 'undici'
import { ERRORS, gatewayError, isGatewayError, type ErrorSpec, type GatewayError } from '../../core/errors.js'
import type { AbortSource, ByteStream, UpstreamClient, UpstreamRequest, UpstreamResponse } from '../../core/ports.js'
import type { HealthStatus } from '../../core/service.js'
import { isConnectableAddress } from './custom-host-policy.js'

export interface UndiciUpstreamClientOptions {
  /** Most connections per origin. Default 128. */
  readonly connectionsPerOrigin?: number
  /** Idle keep-alive time of a pooled connection (the server's `Keep-Alive` hint may lower it). Default 30 s. */
  readonly keepAliveTimeoutMs?: number
  /** TCP + TLS connect timeout. Default 10 s. */
  readonly connectTimeoutMs?: number
  /** Time allowed for the response headers once the request is sent. Default 600 s. */
  readonly headersTimeoutMs?: number
  /** Longest silence between two body chunks. Default 600 s. */
  readonly bodyTimeoutMs?: number
  /** How long `close()` lets in-flight requests finish before it destroys the connections. Default 5 s. */
  readonly closeGraceMs?: number
  /** Most origins with a live pool; beyond it the oldest idle pool is closed. Default 512. */
  readonly maxOrigins?: number
  /**
   * Connect-time address filter, applied to every address a host name resolves to when a
   * connection opens (so a name that re-resolves after the custom-host check, DNS rebinding, is
   * still judged). Default: `isConnectableAddress` (no link-local or cloud-metadata address).
   */
  readonly isAddressAllowed?: (address: string, hostname: string) => boolean
}

/** Error codes (from node:net and undici) that mean "the provider did not answer in time" (the gateway's own limits). */
const TIMEOUT_CODES: ReadonlySet<string> = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'ETIMEDOUT'])
const BODY_TIMEOUT_CODE = 'UND_ERR_BODY_TIMEOUT'
const ADDRESS_REFUSED_CODE = 'EGATEWAY_ADDRESS_REFUSED'

/**
 * One upstream request on undici's `dispatch` handler API, and the push body of its response.
 * Callbacks run synchronously from the socket read, with no Node stream in between (the same path
 * as the bench's bare forwarder). Chunks that arrive before a consumer attaches are kept in order.
 */
class UpstreamExchange implements Dispatcher.DispatchHandler, ByteStream {
  readonly #signal: AbortSignal | AbortSource
  readonly #onClientAbort: () => void
  #resolve: ((response: UpstreamResponse) => void) | null = null
  #reject: ((error: GatewayError) => void) | null = null
  #controller: Dispatcher.DispatchController | null = null
  #timer: NodeJS.Timeout | null = null
  #timedOut = false
  #listening = false
  // Body state
  #pending: Buffer[] | null = null
  #ended = false
  #error: unknown = null
  #destroyed = false
  #onData: ((chunk: Buffer) => void) | null = null
  #onEnd: (() => void) | null = null
  #onError: ((error: unknown) => void) | null = null

  constructor(signal: AbortSignal | AbortSource, requestTimeoutMs: number | null) {
    this.#signal = signal
    this.#onClientAbort = () => this.#abort(signal.reason ?? new Error('client aborted'))
    if (requestTimeoutMs !== null) this.#timer = setTimeout(onRequestTimeout, requestTimeoutMs, this)
  }

  /** Resolves at the response headers; rejects with a `GatewayError` before them. */
  start(pool: Pool, request: UpstreamRequest): Promise<UpstreamResponse> {
    return new Promise((resolve, reject) => {
      this.#resolve = resolve
      this.#reject = reject
      if (this.#signal.aborted) {
        this.#fail(new Error('client aborted'))
        return
      }
      this.#listen()
      pool.dispatch(
        { path: request.path, method: request.method as Dispatcher.HttpMethod, headers: request.headers, body: request.body, bodyTimeout: request.idleTimeoutMs ?? null },
        this,
      )
    })
  }

  /** Timer callback: the response headers did not arrive within the request's own timeout. */
  expire(): void {
    this.#timer = null
    this.#timedOut = true
    this.#abort(new Error('request timeout'))
  }

  // undici handler ---------------------------------------------------------------------------

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.#controller = controller
    if (this.#timedOut || this.#signal.aborted || this.#destroyed) controller.abort(new Error('aborted before start'))
  }

  onResponseStart(_controller: Dispatcher.DispatchController, statusCode: number, headers: Record<string, string | string[] | undefined>): void {
    this.#clearTimer()
    const resolve = this.#resolve
    this.#resolve = null
    this.#reject = null
    resolve?.({ status: statusCode, headers, body: this })
  }

  onResponseData(_controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.#destroyed) return
    if (this.#onData !== null) this.#onData(chunk)
    else (this.#pending ??= []).push(chunk)
  }

  onResponseEnd(): void {
    this.#unlisten()
    if (this.#destroyed) return
    this.#ended = true
    this.#onEnd?.()
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    this.#unlisten()
    this.#clearTimer()
    if (this.#reject !== null) {
      this.#fail(error)
      return
    }
    if (this.#destroyed) return
    this.#error = error
    this.#onError?.(error)
  }

  // ByteStream --------------------------------------------------------------------------------

  consume(onData: (chunk: Buffer) => void, onEnd: () => void, onError: (error: unknown) => void): void {
    this.#onData = onData
    this.#onEnd = onEnd
    this.#onError = onError
    const pending = this.#pending
    this.#pending = null
    if (pending !== null) for (const chunk of pending) if (!this.#destroyed) onData(chunk)
    if (this.#destroyed) return
    if (this.#ended) onEnd()
    else if (this.#error !== null) onError(this.#error)
  }

  pause(): void {
    this.#controller?.pause()
  }

  resume(): void {
    this.#controller?.resume()
  }

  destroy(): void {
    if (this.#destroyed) return
    this.#destroyed = true
    this.#pending = null
    this.#onData = this.#onEnd = this.#onError = null
    this.#unlisten()
    if (!this.#ended && this.#error === null) this.#controller?.abort(new Error('response body discarded'))
  }

  // internals ---------------------------------------------------------------------------------

  #abort(reason: unknown): void {
    if (this.#controller !== null) this.#controller.abort(reason instanceof Error ? reason : new Error(String(reason)))
    else this.#fail(reason)
  }

  #fail(cause: unknown): void {
    const reject = this.#reject
    if (reject === null) return
    this.#resolve = null
    this.#reject = null
    this.#clearTimer()
    this.#unlisten()
    reject(this.#timedOut ? gatewayError(ERRORS.GW_UPSTREAM_REQUEST_TIMEOUT, undefined, { cause }) : sendError(cause, this.#signal))
  }

  #clearTimer(): void {
    if (this.#timer !== null) {
      clearTimeout(this.#timer)
      this.#timer = null
    }
  }

  #listen(): void {
    const signal = this.#signal
    if ('addEventListener' in signal) signal.addEventListener('abort', this.#onClientAbort, { once: true })
    else signal.once('abort', this.#onClientAbort)
    this.#listening = true
  }

  #unlisten(): void {
    if (!this.#listening) return
    this.#listening = false
    const signal = this.#signal
    if ('removeEventListener' in signal) signal.removeEventListener('abort', this.#onClientAbort)
    else signal.removeListener('abort', this.#onClientAbort)
  }
}

function onRequestTimeout(exchange: UpstreamExchange): void {
  exchange.expire()
}

export class UndiciUpstreamClient implements UpstreamClient {
  private readonly pools = new Map<string, Pool>()
  private readonly poolOptions: Pool.Options
  private readonly maxOrigins: number
  private readonly closeGraceMs: number
  private closed = false

  constructor(options: UndiciUpstreamClientOptions = {}) {
    const isAllowed = options.isAddressAllowed ?? isConnectableAddress
    this.maxOrigins = Math.max(1, options.maxOrigins ?? 512)
    this.closeGraceMs = options.closeGraceMs ?? 5_000
    this.poolOptions = {
      connections: options.connectionsPerOrigin ?? 128,
      keepAliveTimeout: options.keepAliveTimeoutMs ?? 30_000,
      headersTimeout: options.headersTimeoutMs ?? 600_000,
      bodyTimeout: options.bodyTimeoutMs ?? 600_000,
      connect: {
        timeout: options.connectTimeoutMs ?? 10_000,
        lookup: guardedLookup(isAllowed),
      },
    }
  }

  async start(): Promise<void> {}

  /** Closes every pool: in-flight requests get `closeGraceMs` to finish, then their connections are destroyed. */
  async close(): Promise<void> {
    this.closed = true
    const pools = [...this.pools.values()]
    this.pools.clear()
    let timer: NodeJS.Timeout | undefined
    const graceOver = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(resolve, this.closeGraceMs, 'timeout')
    })
    const drained = Promise.allSettled(pools.map((pool) => pool.close()))
    const outcome = await Promise.race([drained, graceOver])
    clearTimeout(timer)
    if (outcome === 'timeout') await Promise.allSettled(pools.map((pool) => pool.destroy()))
  }

  async health(): Promise<HealthStatus> {
    return this.closed ? { ok: false, detail: 'upstream client closed' } : { ok: true }
  }

  send(request: UpstreamRequest): Promise<UpstreamResponse> {
    let pool: Pool
    try {
      pool = this.pools.get(request.origin) ?? this.openPool(request.origin)
    } catch (error) {
      return Promise.reject(error)
    }
    return new UpstreamExchange(request.signal, request.requestTimeoutMs).start(pool, request)
  }

  /** Maps an error raised by a response body stream. */
  toError(error: unknown, requestTimeoutMs: number | null): GatewayError {
    if (isGatewayError(error)) return error
    const code = errorCode(error)
    if (code === BODY_TIMEOUT_CODE) {
      return requestTimeoutMs === null
        ? gatewayError(ERRORS.GW_UPSTREAM_TIMEOUT, 'The provider sent nothing for longer than the idle timeout', { cause: error })
        : gatewayError(ERRORS.GW_UPSTREAM_REQUEST_TIMEOUT, `The provider sent nothing for longer than x-gateway-request-timeout (${requestTimeoutMs} ms)`, { cause: error })
    }
    if (code !== null && TIMEOUT_CODES.has(code)) return wrap(ERRORS.GW_UPSTREAM_TIMEOUT, error)
    return wrap(ERRORS.GW_UPSTREAM_STREAM_BROKEN, error)
  }

  private openPool(origin: string): Pool {
    if (this.closed) throw gatewayError(ERRORS.GW_UNAVAILABLE)
    if (this.pools.size >= this.maxOrigins) this.evictOne()
    const pool = new Pool(origin, this.poolOptions)
    this.pools.set(origin, pool)
    return pool
  }

  /** Closes the oldest pool with nothing in flight (or the oldest, which still finishes its requests). */
  private evictOne(): void {
    let victim: string | null = null
    for (const [origin, pool] of this.pools) {
      victim ??= origin
      const stats = pool.stats
      if (stats.running === 0 && stats.pending === 0) {
        victim = origin
        break
      }
    }
    if (victim === null) return
    const pool = this.pools.get(victim)
    this.pools.delete(victim)
    pool?.close().catch(noop)
  }
}

function noop(): void {}

function wrap(spec: ErrorSpec, cause: unknown): GatewayError {
  return gatewayError(spec, undefined, { cause })
}

/** Maps an error raised before any response headers. */
function sendError(err: unknown, clientSignal: AbortSignal | AbortSource): GatewayError {
  if (isGatewayError(err)) return err
  const code = errorCode(err)
  if (code !== null && TIMEOUT_CODES.has(code)) return wrap(ERRORS.GW_UPSTREAM_TIMEOUT, err)
  if (clientSignal.aborted) {
    // Nobody is waiting for this reply any more; the code only matters for logs.
    return gatewayError(ERRORS.GW_UPSTREAM_UNREACHABLE, 'The client closed the request before the provider answered', { cause: err })
  }
  return wrap(ERRORS.GW_UPSTREAM_UNREACHABLE, err)
}

/** The `code` of an error, looking through `cause` and `AggregateError` (happy-eyeballs connects). */
function errorCode(err: unknown): string | null {
  let current: unknown = err
  for (let depth = 0; depth < 4 && typeof current === 'object' && current !== null; depth++) {
    const code = (current as { code?: unknown }).code
    if (typeof code === 'string') return code
    if (current instanceof AggregateError && current.errors.length > 0) current = current.errors[0]
    else current = (current as { cause?: unknown }).cause
  }
  return null
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void

/** A `net.connect` lookup that refuses DNS answers containing a disallowed address. */
export function guardedLookup(isAllowed: (address: string, hostname: string) => boolean) {
  return function lookup(hostname: string, options: LookupOptions, callback: LookupCallback): void {
    dnsLookup(hostname, options, (err, result, family) => {
      if (err !== null) {
        callback(err, '')
        return
      }
      if (typeof result === 'string' ? !isAllowed(result, hostname) : result.some((entry) => !isAllowed(entry.address, hostname))) {
        const refused: NodeJS.ErrnoException = new Error('address refused by the gateway connect policy')
        refused.code = ADDRESS_REFUSED_CODE
        callback(refused, '')
        return
      }
      callback(null, result, family)
    })
  }
}
