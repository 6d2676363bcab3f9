/**
 * `UndiciUpstreamClient`: sends requests to providers over undici 7 pools, one `Pool` per origin
 * (created on first use), keep-alive, bounded connections, streaming response bodies.
 *
 * Timeouts:
 * - `requestTimeoutMs` on a request (from `x-gateway-request-timeout` or a config): response headers
 *   must arrive within it, counted from `send`, or the upstream call is aborted → 408
 *   `GW_UPSTREAM_REQUEST_TIMEOUT`;
 * - the gateway's own connect/headers timeouts → 504 `GW_UPSTREAM_TIMEOUT`;
 * - the body idle timeout (`bodyTimeoutMs`) surfaces from the body stream; `toError` maps it to 408
 *   when the request carried its own timeout, else 504.
 *
 * Errors handed out are `GatewayError`s with the catalogue's client-safe message; the driver error
 * is kept as `cause` (it may name hosts or carry other detail that must not reach clients).
 *
 * Every connection's DNS answer passes `isAddressAllowed` (default: no link-local or cloud-metadata
 * address), so a host name that re-resolves to a metadata address after the custom-host check
 * (DNS rebinding) still cannot be reached.
 */
import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns'
import { Pool } from 'undici'
import type { HealthStatus, UpstreamClient, UpstreamRequest, UpstreamResponse } from '../../core/ports.js'
import { ERRORS, gatewayError, isGatewayError, type ErrorSpec, type GatewayError } from '../../core/errors.js'
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
  /** Connect-time address filter, applied to every DNS answer. Default: `isConnectableAddress`. */
  readonly isAddressAllowed?: (address: string) => boolean
}

/** Error codes (from node:net and undici) that mean "the provider did not answer in time" (the gateway's own limits). */
const TIMEOUT_CODES: ReadonlySet<string> = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'ETIMEDOUT'])
const BODY_TIMEOUT_CODE = 'UND_ERR_BODY_TIMEOUT'
const ADDRESS_REFUSED_CODE = 'EGATEWAY_ADDRESS_REFUSED'

/** Aborts an upstream request whose headers did not arrive in time; also relays the client's abort. */
class HeaderDeadline {
  readonly controller = new AbortController()
  readonly clientSignal: AbortSignal
  timer: NodeJS.Timeout | null
  timedOut = false

  constructor(clientSignal: AbortSignal, timeoutMs: number) {
    this.clientSignal = clientSignal
    this.timer = setTimeout(onDeadline, timeoutMs, this)
    if (clientSignal.aborted) this.controller.abort(clientSignal.reason)
    else clientSignal.addEventListener('abort', this, { once: true })
  }

  /** EventListener protocol: the client went away. */
  handleEvent(): void {
    this.controller.abort(this.clientSignal.reason)
  }

  stopTimer(): void {
    if (this.timer !== null) {
      clearTimeout(this.timer)
      this.timer = null
    }
  }

  detach(): void {
    this.stopTimer()
    this.clientSignal.removeEventListener('abort', this)
  }
}

function onDeadline(deadline: HeaderDeadline): void {
  deadline.timer = null
  deadline.timedOut = true
  deadline.controller.abort()
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

  async send(request: UpstreamRequest): Promise<UpstreamResponse> {
    const pool = this.pools.get(request.origin) ?? this.openPool(request.origin)
    if (request.requestTimeoutMs === null) {
      try {
        const res = await pool.request({
          path: request.path,
          method: request.method,
          headers: request.headers,
          body: request.body,
          signal: request.signal,
        })
        return { status: res.statusCode, headers: res.headers, body: res.body }
      } catch (err) {
        throw sendError(err, request.signal)
      }
    }
    const deadline = new HeaderDeadline(request.signal, request.requestTimeoutMs)
    try {
      const res = await pool.request({
        path: request.path,
        method: request.method,
        headers: request.headers,
        body: request.body,
        signal: deadline.controller.signal,
      })
      deadline.stopTimer()
      // The client's abort must keep reaching the body until it is done.
      res.body.once('close', deadline.detach.bind(deadline))
      return { status: res.statusCode, headers: res.headers, body: res.body }
    } catch (err) {
      deadline.detach()
      if (deadline.timedOut) throw gatewayError(ERRORS.GW_UPSTREAM_REQUEST_TIMEOUT, undefined, { cause: err })
      throw sendError(err, request.signal)
    }
  }

  /** Maps an error raised by a response body stream. */
  toError(error: unknown, requestTimeoutMs: number | null): GatewayError {
    if (isGatewayError(error)) return error
    const code = errorCode(error)
    if (code === BODY_TIMEOUT_CODE) {
      return wrap(requestTimeoutMs === null ? ERRORS.GW_UPSTREAM_TIMEOUT : ERRORS.GW_UPSTREAM_REQUEST_TIMEOUT, error)
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

/** Maps an error from `pool.request` (before any response headers). */
function sendError(err: unknown, clientSignal: AbortSignal): GatewayError {
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
function guardedLookup(isAllowed: (address: string) => boolean) {
  return function lookup(hostname: string, options: LookupOptions, callback: LookupCallback): void {
    dnsLookup(hostname, options, (err, result, family) => {
      if (err !== null) {
        callback(err, '')
        return
      }
      if (typeof result === 'string' ? !isAllowed(result) : result.some((entry) => !isAllowed(entry.address))) {
        const refused: NodeJS.ErrnoException = new Error('address refused by the gateway connect policy')
        refused.code = ADDRESS_REFUSED_CODE
        callback(refused, '')
        return
      }
      callback(null, result, family)
    })
  }
}
