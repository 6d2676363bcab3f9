/**
 * The HTTP server: the only module that starts uWebSockets.js. It copies what it needs from the
 * uWS request synchronously (the request object is invalid after the handler returns), matches
 * the route, builds the `RequestContext`, and hands the exchange to the route group's pipeline.
 * It also answers the core routes (`/healthz`, `/readyz`, `/metrics`), CORS preflights, 404, 405
 * and the 400 to a `/v1` path with dot segments itself, and implements graceful shutdown: stop
 * accepting, drain in-flight requests.
 */
import { randomUUID } from 'node:crypto'
import { performance } from 'node:perf_hooks'
import uWS from 'uWebSockets.js'
import { ClientAbort, RequestContext } from '../context.js'
import {
  ERRORS,
  gatewayError,
  toControlPlaneBody,
  toDataPlaneBody,
  toMessagesBody,
  type ApiFormat,
  type GatewayError,
} from '../errors.js'
import type { ErrorShape, Pipeline } from '../pipeline.js'
import { selectsProvider, type HttpMethod, type RouteGroup, type RouteTable } from '../routes.js'
import type { Logger } from '../service.js'
import { UwsExchange } from './exchange.js'
import { headerLimitProblem } from './header-limits.js'
import { statusLine } from './status.js'

export interface HttpServerOptions {
  readonly host: string
  readonly port: number
  readonly maxJsonBodyBytes: number
  readonly maxUploadBodyBytes: number
  readonly routes: RouteTable
  /** The compiled pipeline of each active route group; a missing group answers 404. */
  readonly pipelines: Partial<Record<RouteGroup, Pipeline>>
  /** Backs `/readyz`: whether every started service is healthy, with per-service details. */
  readonly readiness: () => Promise<{ ok: boolean; checks: Record<string, { ok: boolean; detail?: string }> }>
  /** Backs `/metrics` (Prometheus text format). */
  readonly metrics: () => Promise<string>
  readonly logger: Logger
}

const JSON_HEADERS: ReadonlyArray<readonly [string, string]> = [['content-type', 'application/json']]
const CORS_PREFLIGHT_HEADERS: ReadonlyArray<readonly [string, string]> = [
  ['access-control-allow-origin', '*'],
  ['access-control-allow-methods', 'GET, POST, PUT, DELETE, OPTIONS'],
  ['access-control-allow-headers', '*'],
  ['access-control-max-age', '86400'],
]
const TRACE_ID_MAX = 128
const BAD_PATH_MESSAGE = 'The path must not contain "." or ".." segments (raw or percent-encoded)'

export class HttpServer {
  readonly #options: HttpServerOptions
  readonly #app: uWS.TemplatedApp
  #listenSocket: uWS.us_listen_socket | null = null
  #draining = false
  #inFlight = 0
  #onIdle: (() => void) | null = null

  constructor(options: HttpServerOptions) {
    this.#options = options
    this.#app = uWS.App()
    this.#app.any('/*', (res, req) => {
      try {
        this.#handle(res, req)
      } catch (error) {
        // An exception escaping a uWS handler aborts the process: answer 500 instead.
        this.#options.logger.error({ err: error }, 'request handler threw')
        try {
          this.#sendError(res, gatewayError(ERRORS.GW_INTERNAL), 'unknown', true)
        } catch {
          // The response was already used; nothing more can be sent.
        }
      }
    })
  }

  /** Starts listening; resolves with the bound port (useful with port 0). */
  listen(): Promise<number> {
    return new Promise((resolve, reject) => {
      this.#app.listen(this.#options.host, this.#options.port, (socket) => {
        if (socket === false) {
          reject(new Error(`cannot listen on ${this.#options.host}:${this.#options.port} (port in use?)`))
          return
        }
        this.#listenSocket = socket
        resolve(uWS.us_socket_local_port(socket as unknown as uWS.us_socket))
      })
    })
  }

  get inFlight(): number {
    return this.#inFlight
  }

  /** Stops accepting connections; requests on open keep-alive connections get 503 and a close. */
  stopAccepting(): void {
    this.#draining = true
    if (this.#listenSocket !== null) {
      uWS.us_listen_socket_close(this.#listenSocket)
      this.#listenSocket = null
    }
  }

  /** Resolves `true` when no request is in flight, or `false` when the deadline passed first. */
  drain(deadlineMs: number): Promise<boolean> {
    if (this.#inFlight === 0) return Promise.resolve(true)
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#onIdle = null
        resolve(false)
      }, deadlineMs)
      this.#onIdle = () => {
        clearTimeout(timer)
        this.#onIdle = null
        resolve(true)
      }
    })
  }

  #handle(res: uWS.HttpResponse, req: uWS.HttpRequest): void {
    const receivedAt = Date.now()
    const startedAt = performance.now()
    const method = req.getCaseSensitiveMethod().toUpperCase()
    const path = req.getUrl()
    const query = req.getQuery() ?? ''
    const headers: Record<string, string> = {}
    let headerFields = 0
    let headerBytes = 0
    req.forEach((name, value) => {
      headerFields++
      headerBytes += name.length + value.length + 4
      const previous = headers[name]
      // A header sent on several lines keeps every value, in order (RFC 9110 §5.3).
      headers[name] = previous === undefined ? value : `${previous}${name === 'cookie' ? '; ' : ', '}${value}`
    })
    const requestId = randomUUID()
    const clientTrace = headers['x-gateway-trace-id']
    const traceId = clientTrace !== undefined && clientTrace.length > 0 && clientTrace.length <= TRACE_ID_MAX ? clientTrace : requestId
    const headerProblem = headerLimitProblem(headerFields, headerBytes)
    if (headerProblem !== null) {
      this.#refuseHeaders(res, method, path, headers, traceId, headerProblem)
      return
    }

    if (method === 'OPTIONS') {
      res.writeStatus('204 No Content')
      for (const [name, value] of CORS_PREFLIGHT_HEADERS) res.writeHeader(name, value)
      res.end()
      return
    }
    if (this.#draining) {
      this.#sendError(res, gatewayError(ERRORS.GW_UNAVAILABLE), traceId, true)
      return
    }

    const lookup = this.#options.routes.lookup(method, path, selectsProvider(headers))
    if (lookup.kind === 'not-found') {
      this.#sendError(res, gatewayError(ERRORS.GW_REQ_ROUTE_NOT_FOUND, `No route for ${method} ${path}`), traceId, false, method === 'HEAD')
      return
    }
    if (lookup.kind === 'bad-path') {
      // Refused before any plugin runs: nothing is authenticated, counted or forwarded.
      this.#sendError(res, gatewayError(ERRORS.GW_REQ_INVALID, BAD_PATH_MESSAGE), traceId, false, method === 'HEAD')
      return
    }
    if (lookup.kind === 'method-not-allowed') {
      this.#sendError(res, gatewayError(ERRORS.GW_REQ_METHOD_NOT_ALLOWED, `${method} is not allowed on ${path}`), traceId, false, method === 'HEAD')
      return
    }
    if (lookup.kind === 'core') {
      this.#serveCore(res, lookup.name, traceId)
      return
    }

    const { route, params } = lookup.match
    const pipeline = this.#options.pipelines[route.group]
    if (pipeline === undefined) {
      this.#sendError(res, gatewayError(ERRORS.GW_REQ_ROUTE_NOT_FOUND, `No route for ${method} ${path} (its plugins are disabled)`), traceId, false)
      return
    }

    const abort = new ClientAbort()
    const exchange = new UwsExchange(res, abort, pipeline.errorShape)
    const contentLength = headers['content-length']
    if (route.body !== 'none') {
      const limit = route.bodyLimit === 'json' ? this.#options.maxJsonBodyBytes : this.#options.maxUploadBodyBytes
      const declared = contentLength === undefined ? null : Number(contentLength)
      exchange.startBody(limit, Number.isFinite(declared) ? declared : null, headers['transfer-encoding'] !== undefined)
    }
    const ctx = new RequestContext({
      requestId,
      traceId,
      receivedAt,
      startedAt,
      method: method as HttpMethod,
      path,
      query,
      headers,
      clientIp: route.group === 'admin' ? Buffer.from(res.getRemoteAddressAsText()).toString() : null,
      route,
      params,
      signal: abort,
    })
    this.#inFlight++
    pipeline.handle(ctx, exchange).finally(() => {
      this.#inFlight--
      if (this.#inFlight === 0) this.#onIdle?.()
    })
  }

  #sendError(res: uWS.HttpResponse, error: GatewayError, traceId: string, close: boolean, head = false, shape: ErrorShape = 'data', format: ApiFormat = 'openai'): void {
    res.writeStatus(statusLine(error.status))
    res.writeHeader('content-type', 'application/json')
    res.writeHeader('x-gateway-trace-id', traceId)
    // A HEAD reply has no body: bytes after the headers would be read as the next response.
    if (head) res.endWithoutBody(0, close)
    else res.end(shape === 'control' ? toControlPlaneBody(error) : format === 'messages' ? toMessagesBody(error) : toDataPlaneBody(error), close)
  }

  /**
   * 431 in the error shape of the route the request names (Admin API envelope on admin routes, the
   * Messages shape on `/v1/messages`), and the connection closed: a client this far over the limits
   * is not worth keeping alive.
   */
  #refuseHeaders(res: uWS.HttpResponse, method: string, path: string, headers: Record<string, string>, traceId: string, problem: string): void {
    const lookup = this.#options.routes.lookup(method, path, selectsProvider(headers))
    const route = lookup.kind === 'route' ? lookup.match.route : null
    const shape = route === null ? 'data' : (this.#options.pipelines[route.group]?.errorShape ?? 'data')
    this.#sendError(res, gatewayError(ERRORS.GW_REQ_HEADERS_TOO_LARGE, problem), traceId, true, method === 'HEAD', shape, route?.format)
  }

  #serveCore(res: uWS.HttpResponse, name: 'healthz' | 'readyz' | 'metrics', traceId: string): void {
    if (name === 'healthz') {
      res.writeStatus('200 OK')
      res.writeHeader('content-type', 'application/json')
      res.end('{"status":"ok"}')
      return
    }
    const exchange = new UwsExchange(res, new ClientAbort(), 'data')
    const answer =
      name === 'readyz'
        ? this.#options.readiness().then((state) => {
            const ready = state.ok && !this.#draining
            return { status: ready ? 200 : 503, headers: JSON_HEADERS, body: JSON.stringify({ status: ready ? 'ready' : 'not_ready', checks: state.checks }) }
          })
        : this.#options.metrics().then((text) => ({ status: 200, headers: [['content-type', 'text/plain; version=0.0.4']] as const, body: text }))
    answer
      .catch((error: unknown) => {
        this.#options.logger.error({ err: error, probe: name }, 'probe failed')
        return { status: 503, headers: JSON_HEADERS, body: JSON.stringify({ status: 'not_ready' }) }
      })
      .then((reply) => exchange.sendSimple(reply.status, reply.headers, reply.body, traceId))
  }
}
