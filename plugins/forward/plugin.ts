/**
 * forward: the terminal plugin of the inference and pass-through groups.
 * Phases: onForward (priority 100), onLog (fills `ctx.usage`; as the terminal plugin's, it runs
 * before every other onLog, so rate-limit, budget and log read the final usage).
 * Reads `ctx.principal`, `ctx.gatewayCredential`, `ctx.credential`, `ctx.route`, `ctx.prompt`,
 * headers, `ctx.rawBody`/`ctx.body`; writes `ctx.target`, `ctx.model`, `ctx.streaming`, `ctx.usage`.
 * A prompt request (`ctx.prompt`, written by prompt-render with the rendered body) is sent as the
 * route its template renders to (`/chat/completions` or `/completions`), with that route's usage
 * extraction; a prompt route that reaches forward without it (prompt-render off) → 404.
 * I/O: one upstream request through the UpstreamClient (pooled, aborted when the client leaves).
 * Provider selection: the credential a virtual key resolved to (`ctx.credential`: provider, key,
 * custom host; the client's `Authorization` and `x-gateway-provider` are then ignored and
 * `Authorization` is not forwarded; `x-gateway-custom-host` with it is refused (400, by the virtual-key plugin): the stored key
 * goes only to its provider or its own `custom_host`); otherwise `x-gateway-provider` +
 * `Authorization` (the provider key), optionally `x-gateway-custom-host`. Custom hosts are checked
 * against the SSRF allow-list on every request (results are cached by the registry).
 * `x-gateway-config` is refused (400): configs are not enabled, and ignoring one would send the
 * request somewhere the client did not ask for.
 * The gateway credential (`ctx.gatewayCredential`, written by auth) never goes upstream: a header
 * whose value contains it is dropped, whatever its name (pass-through, first-class routes and
 * `x-gateway-forward-headers` alike), and it is never taken as the provider key.
 * Timeouts: `x-gateway-request-timeout` bounds the wait for the response headers (else the upstream
 * client's `headersTimeoutMs`) and, once they arrived, every silence between two body chunks (else
 * `idleTimeoutMs`, 60 s): a stalled stream ends with a `timeout_error` event.
 * Failure policy: upstream unreachable/reset → 502, gateway timeout → 504, request timeout → 408;
 * provider errors keep their status (normalised into the OpenAI shape on first-class routes).
 */
import type { Attempt, RequestContext, UpstreamTarget } from '../../core/context.js'
import { ERRORS, gatewayError, GatewayError } from '../../core/errors.js'
import type { AttemptGate, GatewayPlugin, Reply } from '../../core/plugin.js'
import type { CustomHostCheck, ProviderRegistry, ProviderSpec, UpstreamClient, UpstreamResponse } from '../../core/ports.js'
import type { RouteSpec } from '../../core/routes.js'
import type { ForwardConfig } from './config.js'
import { normaliseProviderError } from './provider-error.js'
import { ConfigRouter, type Breaker } from './router.js'
import { extractUsage } from './usage.js'

/** Request headers never sent upstream on pass-through (hop-by-hop, framing, the gateway's own). */
const NOT_FORWARDED = new Set([
  'host',
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'content-length',
  'expect',
])

/** Response headers not copied back (framing is the gateway's own; uWS writes its own Date). */
const NOT_RETURNED = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length', 'date', 'trailer', 'upgrade'])

const USAGE_ROUTES = new Set(['chat.completions', 'completions', 'embeddings'])

const PROMPTS_OFF = gatewayError(
  ERRORS.GW_REQ_ROUTE_NOT_FOUND,
  'Prompt templates are not enabled on this gateway (the prompt-render plugin is off): render the prompt yourself and call /v1/chat/completions',
)

const CONFIGS_OFF = gatewayError(
  ERRORS.GW_CONFIG_INVALID,
  'Configs are not enabled on this gateway (the routing plugin is off): send x-gateway-provider or x-gateway-virtual-key',
  { param: 'x-gateway-config' },
)

interface ProviderOrigin {
  readonly origin: string
  readonly basePath: string
}

/** Which provider and credential one upstream call uses, and where that choice came from. */
interface Selection {
  readonly provider: string | undefined
  /** The provider key; `null`: the client's `Authorization` (direct credentials). */
  readonly apiKey: string | null
  readonly customHost: string | undefined
  /** A virtual key's stored credential: the client's `Authorization` is never forwarded with it. */
  readonly stored: boolean
  /** The request input that named the provider and host, for error messages. */
  readonly providerParam: string
  readonly hostParam: string
}

export class ForwardPlugin implements GatewayPlugin {
  readonly #config: ForwardConfig
  readonly #registry: ProviderRegistry
  readonly #upstream: UpstreamClient
  readonly #forwardedOnFirstClass: readonly string[]
  /** Base URLs parsed once at boot. */
  readonly #origins = new Map<string, ProviderOrigin>()

  readonly #router: ConfigRouter

  constructor(config: ForwardConfig, registry: ProviderRegistry, upstream: UpstreamClient, breaker: Breaker | null = null) {
    this.#config = config
    this.#registry = registry
    this.#upstream = upstream
    this.#router = new ConfigRouter(config, (ctx, attempt) => this.#sendAttempt(ctx, attempt), breaker, randomSource(config.loadbalanceSeed))
    this.#forwardedOnFirstClass = config.forwardedRequestHeaders.map((name) => name.toLowerCase())
    for (const spec of registry.list()) {
      if (spec.baseUrl.length === 0) continue
      const url = new URL(spec.baseUrl)
      this.#origins.set(spec.slug, { origin: url.origin, basePath: url.pathname.replace(/\/+$/, '') })
    }
  }

  async onForward(ctx: RequestContext, gate: AttemptGate): Promise<Reply | GatewayError> {
    // A prompt goes out as the first-class route its template renders to (written by prompt-render).
    const route = ctx.prompt === null ? ctx.route : ctx.prompt.route
    // Only a prompt route has no upstream path of its own: prompt-render did not run.
    if (route.upstreamPath === null && route.group === 'inference') return PROMPTS_OFF
    const body = ctx.body
    if (body !== null) {
      if (typeof body.model === 'string') ctx.model = body.model
      ctx.streaming = body.stream === true
    }
    const plan = ctx.routing
    if (plan !== null) return this.#router.route(ctx, plan, gate)
    if (ctx.headers['x-gateway-config'] !== undefined) return CONFIGS_OFF
    const requestTimeoutMs = this.#requestTimeout(ctx)
    if (requestTimeoutMs instanceof GatewayError) return requestTimeoutMs
    return this.#send(ctx, route, this.#headerSelection(ctx), ctx.rawBody, requestTimeoutMs, null)
  }

  onLog(ctx: RequestContext): void {
    if (ctx.responseTail === null || ctx.status < 200 || ctx.status >= 300 || !USAGE_ROUTES.has((ctx.prompt === null ? ctx.route : ctx.prompt.route).id)) return
    // A reply from the response cache used no tokens: nothing to count against limits and budgets.
    if (ctx.attempt !== null && ctx.attempt.cacheStatus === 'HIT') return
    ctx.usage = extractUsage(ctx.responseTail)
  }

  /** One attempt of a config-routed request (the router calls it): its target's selection, body and timeout. */
  async #sendAttempt(ctx: RequestContext, attempt: Attempt): Promise<Reply | GatewayError> {
    const route = ctx.prompt === null ? ctx.route : ctx.prompt.route
    const target = attempt.target
    if (attempt.body !== null && typeof attempt.body.model === 'string') ctx.model = attempt.body.model
    let requestTimeoutMs: number | null | GatewayError = target.requestTimeoutMs
    if (requestTimeoutMs === null) requestTimeoutMs = this.#requestTimeout(ctx)
    if (requestTimeoutMs instanceof GatewayError) return requestTimeoutMs
    let selection: Selection
    const credential = attempt.credential
    if (credential !== null) {
      // A saved config may point its virtual key at a custom host (checked against the allow-list here too).
      selection = {
        provider: credential.provider,
        apiKey: credential.apiKey ?? '',
        customHost: target.customHost ?? credential.customHost ?? undefined,
        stored: true,
        providerParam: 'x-gateway-config',
        hostParam: 'x-gateway-config',
      }
    } else if (target.provider !== null) {
      selection = { provider: target.provider, apiKey: target.apiKey, customHost: target.customHost ?? undefined, stored: false, providerParam: 'x-gateway-config', hostParam: 'x-gateway-config' }
    } else if (target.virtualKey !== null) {
      return gatewayError(ERRORS.GW_REQ_PROVIDER_MISSING, "The config's virtual key was not resolved: the virtual-key plugin is off on this gateway", { param: 'x-gateway-config' })
    } else {
      // A config without targets: its settings apply to the request's own provider selection.
      const own = this.#headerSelection(ctx)
      selection = target.customHost === null ? own : { ...own, customHost: target.customHost, hostParam: 'x-gateway-config' }
    }
    return this.#send(ctx, route, selection, attempt.rawBody, requestTimeoutMs, target.forwardHeaders)
  }

  /** Sends one request upstream and turns the response into the reply. */
  async #send(
    ctx: RequestContext,
    route: RouteSpec,
    selection: Selection,
    rawBody: Buffer | null,
    requestTimeoutMs: number | null,
    configHeaders: readonly string[] | null,
  ): Promise<Reply | GatewayError> {
    // Awaited only while a custom host's first check is pending: every await costs the request path an allocation.
    const resolved = this.#resolveTarget(ctx, route, selection)
    const target = resolved instanceof Promise ? await resolved : resolved
    if (target instanceof GatewayError) return target
    ctx.target = target

    const relative = route.upstreamPath ?? ctx.path.slice(3)
    let path = target.basePath + relative
    const query = target.authQuery.length === 0 ? ctx.query : ctx.query.length === 0 ? target.authQuery : `${ctx.query}&${target.authQuery}`
    if (query.length > 0) path += `?${query}`

    let response: UpstreamResponse
    try {
      response = await this.#upstream.send({
        origin: target.origin,
        path,
        method: ctx.method,
        headers: this.#upstreamHeaders(ctx, target, selection, configHeaders),
        body: ctx.method === 'GET' ? null : rawBody,
        signal: ctx.signal,
        requestTimeoutMs,
        idleTimeoutMs: requestTimeoutMs ?? this.#config.idleTimeoutMs,
      })
    } catch (error) {
      if (error instanceof GatewayError) return error
      throw error
    }
    return this.#reply(ctx, target, response, requestTimeoutMs)
  }

  /** The selection of a request without a config: its virtual key's credential, else its headers. */
  #headerSelection(ctx: RequestContext): Selection {
    const stored = ctx.credential
    if (stored !== null) {
      return { provider: stored.provider, apiKey: stored.apiKey ?? '', customHost: stored.customHost ?? undefined, stored: true, providerParam: 'x-gateway-virtual-key', hostParam: 'x-gateway-virtual-key' }
    }
    const headers = ctx.headers
    return { provider: headers['x-gateway-provider'], apiKey: null, customHost: headers['x-gateway-custom-host'], stored: false, providerParam: 'x-gateway-provider', hostParam: 'x-gateway-custom-host' }
  }

  #resolveTarget(ctx: RequestContext, route: RouteSpec, selection: Selection): UpstreamTarget | GatewayError | Promise<UpstreamTarget | GatewayError> {
    const headers = ctx.headers
    const slug = selection.provider
    if (slug === undefined || slug.length === 0) {
      if (ctx.prompt !== null) {
        return gatewayError(ERRORS.GW_REQ_PROVIDER_MISSING, "The prompt's virtual key was not resolved: the virtual-key plugin is off on this gateway")
      }
      if (headers['x-gateway-virtual-key'] !== undefined) {
        // The virtual-key plugin resolves the header before forward runs; it is switched off.
        return gatewayError(ERRORS.GW_REQ_PROVIDER_MISSING, 'Virtual keys are not enabled on this gateway (the virtual-key plugin is off): send x-gateway-provider')
      }
      return gatewayError(ERRORS.GW_REQ_PROVIDER_MISSING)
    }
    const spec = this.#registry.get(slug)
    if (spec === undefined) {
      return gatewayError(ERRORS.GW_REQ_PROVIDER_UNKNOWN, `Unknown provider "${slug.slice(0, 64)}"`, { param: selection.providerParam })
    }
    if (route.group === 'inference' && spec.unsupportedRoutes?.includes(route.id)) {
      return gatewayError(ERRORS.GW_REQ_ROUTE_UNSUPPORTED, `Provider "${slug}" does not support ${route.pattern}`)
    }

    // A stored credential goes only to its own custom host (or its saved config's), never the
    // client's (the virtual-key plugin refuses x-gateway-custom-host next to a virtual key, and an
    // inline config may not pair them).
    const customHost = selection.customHost
    const hostParam = selection.hostParam
    if (customHost !== undefined) {
      const targetOf = (check: CustomHostCheck): UpstreamTarget | GatewayError =>
        check.ok
          ? this.#targetAt(ctx, spec, check, selection)
          : gatewayError(ERRORS.GW_REQ_CUSTOM_HOST_REFUSED, `The custom host is not allowed: ${check.reason}`, { param: hostParam })
      const check = this.#registry.checkCustomHost(customHost)
      return check instanceof Promise ? check.then(targetOf) : targetOf(check)
    }
    const location = this.#origins.get(slug)
    if (location === undefined) {
      const fix = hostParam === 'x-gateway-custom-host' ? 'send x-gateway-custom-host' : hostParam === 'x-gateway-config' ? "set the config target's custom_host" : "set the virtual key's custom_host"
      return gatewayError(ERRORS.GW_REQ_INVALID, `Provider "${slug}" has no public endpoint: ${fix}`, { param: hostParam })
    }
    return this.#targetAt(ctx, spec, location, selection)
  }

  /** The target at `location` with the credential: the selection's (a virtual key's, a config's), else the client's `Authorization`. */
  #targetAt(ctx: RequestContext, spec: ProviderSpec, location: ProviderOrigin, selection: Selection): UpstreamTarget {
    if (selection.apiKey !== null) return credentialTarget(spec, location, selection.apiKey)
    // The Authorization header is the provider key, unless it carries the gateway's own key.
    let authorization = ctx.principal?.credentialHeader === 'authorization' ? undefined : ctx.headers.authorization
    if (authorization !== undefined && carriesCredential(authorization, ctx.gatewayCredential)) authorization = undefined
    const credential = authorization === undefined ? '' : authorization.startsWith('Bearer ') ? authorization.slice(7).trim() : authorization.trim()
    return credentialTarget(spec, location, credential)
  }

  #requestTimeout(ctx: RequestContext): number | null | GatewayError {
    const raw = ctx.headers['x-gateway-request-timeout']
    if (raw === undefined) return null
    const value = Number(raw)
    if (!Number.isInteger(value) || value <= 0 || value > this.#config.maxRequestTimeoutMs) {
      return gatewayError(ERRORS.GW_REQ_INVALID, `x-gateway-request-timeout must be a whole number of milliseconds between 1 and ${this.#config.maxRequestTimeoutMs}`, {
        param: 'x-gateway-request-timeout',
      })
    }
    return value
  }

  #upstreamHeaders(ctx: RequestContext, target: UpstreamTarget, selection: Selection, configHeaders: readonly string[] | null): Record<string, string> {
    const headers: Record<string, string> = {}
    const incoming = ctx.headers
    // With a virtual key's or a config's credential the client's Authorization is not the provider
    // key (or is the gateway's own).
    const gatewayOwnsAuthorization = ctx.principal?.credentialHeader === 'authorization' || selection.apiKey !== null
    // Whatever header the client repeated the gateway key in (`x-api-key`, `api-key`, ...), it stays here.
    const credential = ctx.gatewayCredential
    if (ctx.route.group === 'passthrough') {
      const connectionScoped = connectionHeaderNames(incoming.connection)
      for (const name in incoming) {
        if (NOT_FORWARDED.has(name) || name.startsWith('x-gateway-')) continue
        if (name === 'authorization' && gatewayOwnsAuthorization) continue
        if (connectionScoped !== null && connectionScoped.has(name)) continue
        const value = incoming[name] as string
        if (carriesCredential(value, credential)) continue
        headers[name] = value
      }
    } else {
      for (const name of this.#forwardedOnFirstClass) {
        const value = incoming[name]
        if (value !== undefined && !carriesCredential(value, credential)) headers[name] = value
      }
    }
    const extra = incoming['x-gateway-forward-headers']
    if (extra !== undefined) for (const raw of extra.split(',')) this.#forwardNamed(headers, incoming, raw.trim().toLowerCase(), gatewayOwnsAuthorization, credential)
    if (configHeaders !== null) for (const name of configHeaders) this.#forwardNamed(headers, incoming, name, gatewayOwnsAuthorization, credential)
    for (const [name, value] of target.authHeaders) headers[name] = value
    return headers
  }

  /** Copies one client header a request or its config asked to forward, unless it is the gateway's own, hop-by-hop or carries the gateway credential. */
  #forwardNamed(headers: Record<string, string>, incoming: Readonly<Record<string, string>>, name: string, gatewayOwnsAuthorization: boolean, credential: string | null): void {
    if (name.length === 0 || NOT_FORWARDED.has(name) || name.startsWith('x-gateway-')) return
    if (name === 'authorization' && gatewayOwnsAuthorization) return
    const value = incoming[name]
    if (value !== undefined && !carriesCredential(value, credential)) headers[name] = value
  }

  #reply(ctx: RequestContext, target: UpstreamTarget, response: UpstreamResponse, requestTimeoutMs: number | null): Reply | Promise<Reply | GatewayError> {
    const headers: Array<readonly [string, string]> = []
    let contentType = ''
    let contentLength = -1
    for (const name in response.headers) {
      const value = response.headers[name]
      if (value === undefined) continue
      if (name === 'content-type') contentType = Array.isArray(value) ? (value[0] ?? '') : value
      if (name === 'content-length') contentLength = Number(value)
      if (NOT_RETURNED.has(name) || name.startsWith('x-gateway-')) continue
      if (Array.isArray(value)) for (const item of value) headers.push([name, item])
      else headers.push([name, value])
    }
    const sse = contentType.startsWith('text/event-stream')
    const status = response.status
    if (status === 204 || status === 304) {
      response.body.destroy()
      return { status, headers, body: null }
    }
    const normaliseError = status >= 400 && ctx.route.group === 'inference'
    const limit = this.#config.maxBufferedResponseBytes
    if (!sse && (normaliseError ? contentLength <= limit : contentLength >= 0 && contentLength <= limit)) {
      return readAll(response, limit).then(
        (bytes): Reply => {
          if (!normaliseError) return { status, headers, body: bytes }
          const body = normaliseProviderError(target.provider, status, bytes)
          if (body === bytes) return { status, headers, body }
          return { status, headers: withJsonContentType(headers), body }
        },
        (error: unknown) => this.#upstream.toError(error, requestTimeoutMs),
      )
    }
    return {
      status,
      headers,
      body: { source: response.body, sse, toError: (error: unknown) => this.#upstream.toError(error, requestTimeoutMs) },
    }
  }
}

/**
 * Whether a header value carries the gateway credential: the secret itself, `Bearer <secret>` in any
 * casing or spacing, or the secret inside anything else. Secrets are long random strings (or JWTs),
 * so containment has no false positives; one native substring search, no allocation.
 */
function carriesCredential(value: string, credential: string | null): boolean {
  return credential !== null && value.includes(credential)
}

/** Header names listed in `Connection` apply to one hop only and are not forwarded (RFC 9110 §7.6.1). */
function connectionHeaderNames(connection: string | undefined): Set<string> | null {
  if (connection === undefined) return null
  const names = new Set<string>()
  for (const token of connection.split(',')) {
    const name = token.trim().toLowerCase()
    if (name.length > 0 && name !== 'keep-alive' && name !== 'close') names.add(name)
  }
  return names.size === 0 ? null : names
}

function credentialTarget(spec: ProviderSpec, location: ProviderOrigin, credential: string): UpstreamTarget {
  let authHeaders: Array<readonly [string, string]> = []
  let authQuery = ''
  if (credential.length > 0) {
    if (spec.authStyle === 'bearer') authHeaders = [['authorization', `Bearer ${credential}`]]
    else if (spec.authStyle === 'header') authHeaders = [[spec.authName ?? 'api-key', credential]]
    else if (spec.authStyle === 'query') authQuery = `${encodeURIComponent(spec.authName ?? 'key')}=${encodeURIComponent(credential)}`
  }
  return { provider: spec.slug, origin: location.origin, basePath: location.basePath, authHeaders, authQuery }
}

function withJsonContentType(headers: ReadonlyArray<readonly [string, string]>): Array<readonly [string, string]> {
  const kept: Array<readonly [string, string]> = headers.filter(([name]) => name !== 'content-type' && name !== 'content-encoding')
  kept.push(['content-type', 'application/json'])
  return kept
}

/** Reads a whole upstream body (at most `limit` bytes; the caller checked the declared length). */
function readAll(response: UpstreamResponse, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    let size = 0
    const body = response.body
    body.consume(
      (chunk) => {
        size += chunk.length
        if (size > limit) {
          body.destroy()
          reject(new Error(`upstream body larger than ${limit} bytes`))
          return
        }
        chunks.push(chunk)
      },
      () => resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size)),
      reject,
    )
  })
}

/** `Math.random`, or a seeded generator (mulberry32) so load-balanced picks repeat in tests. */
function randomSource(seed: number | undefined): () => number {
  if (seed === undefined) return Math.random
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}
