/**
 * `RequestContext`: everything one request carries through the pipeline.
 *
 * Fixed shape: every slot is assigned in the constructor (`null` until written) and never added
 * later, so V8 keeps one hidden class for every request. Each slot names its single writer; a
 * plugin that needs per-request state gets a declared slot here, never an ad-hoc property.
 */
import type { ApiKeyType } from './admin-records.js'
import type { BudgetHold } from './budgets.js'
import type { GatewayError } from './errors.js'
import type { LimitSubject, RateLimitClaim, RateLimitHold } from './limits.js'
import type { RoutingPlan, RoutingTarget } from './routing-config.js'
import type { HttpMethod, RouteSpec } from './routes.js'

/** Who is calling: the resolved API key or JWT. */
export interface Principal {
  readonly kind: 'api-key' | 'jwt'
  /** API key id (UUID); for a JWT the token's subject. */
  readonly keyId: string
  readonly keyType: ApiKeyType
  readonly organisationId: string
  /** `null` for organisation (Admin API) keys. */
  readonly workspaceId: string | null
  readonly userId: string | null
  /** Scopes with any `gateway.` prefix removed. */
  readonly scopes: ReadonlySet<string>
  /**
   * Which header carried the gateway credential. When it was `authorization`, that header belongs
   * to the gateway and must not be forwarded to a provider.
   */
  readonly credentialHeader: 'x-gateway-api-key' | 'authorization'
  /**
   * The entities whose rate limits and budgets apply to this caller's requests, in check order:
   * the API key (absent for JWTs), then its workspace (absent for Admin API keys).
   */
  readonly limitSubjects: readonly LimitSubject[]
  /**
   * The saved config (slug or id) requests are routed by when they send no `x-gateway-config`: the
   * API key's `defaults.config_id`, else its workspace's; absent or `null` for none.
   */
  readonly defaultConfig?: string | null
}

/** The provider credential a virtual key resolved to (decrypted; never logged). */
export interface ProviderCredential {
  /** Slug of the virtual key it came from (what clients send and analytics group by). */
  readonly virtualKeySlug: string
  /** Provider slug from the registry. */
  readonly provider: string
  /** The provider API key, or `null` when the endpoint needs none. */
  readonly apiKey: string | null
  /** A self-hosted endpoint, already checked against the custom-host policy when it was saved. */
  readonly customHost: string | null
  /** Provider extras (Azure resource/deployment/api-version, AWS region, ...). */
  readonly modelConfig: Readonly<Record<string, unknown>> | null
}

/** The provider endpoint a request is sent to. */
export interface UpstreamTarget {
  /** Provider slug from the registry (`openai`, `groq`, ...). */
  readonly provider: string
  /** Origin only, e.g. `https://api.openai.com`. */
  readonly origin: string
  /** Path prefix on that origin, e.g. `/v1` (no trailing slash, may be empty). */
  readonly basePath: string
  /** Headers that carry the provider credential (already in the provider's own form). */
  readonly authHeaders: ReadonlyArray<readonly [string, string]>
  /** Query parameters that carry the credential, for providers that want it there (`key=...`). */
  readonly authQuery: string
}

/**
 * A prompt template run (`POST /v1/prompts/{id}/completions` or `/render`, API.md §3), resolved
 * from the path before the body is read. The prompt-render plugin writes it and owns the object
 * (it may carry more than these fields); the others read only what is declared here.
 */
export interface PromptRun {
  /** The prompt's slug (the request log's `prompt_slug`). */
  readonly slug: string
  /** The version rendered (the request log's `prompt_version`). */
  readonly version: number
  /**
   * Slug of the template's virtual key: the virtual-key plugin resolves it in place of
   * `x-gateway-virtual-key` (which prompt-render refuses next to a prompt). `null` on `/render`,
   * which calls no provider.
   */
  readonly virtualKey: string | null
  /**
   * The route the rendered request is forwarded as: `chat.completions` for a chat template,
   * `completions` for a completion template (forward takes its upstream path, provider support
   * and usage extraction from it); on `/render` the render route itself (nothing is forwarded).
   */
  readonly route: RouteSpec
}

/** Token usage reported by the provider. */
export interface Usage {
  readonly promptTokens: number
  readonly completionTokens: number
  readonly totalTokens: number
  readonly cachedTokens: number
}

/** A parsed JSON object body. */
export type JsonObject = Record<string, unknown>

/** See `RequestContext.adminAction`. */
export interface AdminActionNote {
  /** The entry was stored with the change; the audit plugin must not store another. */
  audited: boolean
  /** Workspace UUID the action touched. */
  workspaceId: string | null
  /** Id of the resource acted on (e.g. a created key). */
  resourceId: string | null
  /** The acting user of an unauthenticated action (invite acceptance). */
  userId: string | null
  /** Organisation of an unauthenticated action. */
  organisationId: string | null
}

/** How the exchange with the client ended. */
export type Outcome = 'completed' | 'errored' | 'aborted'

/** What `onChunk` hooks see: one Server-Sent Event's `data` payload (without `data: ` and the blank line). */
export interface SseEvent {
  data: string
  /**
   * The event's other lines as received (`event:`, `id:`, comments), when core parsed it; the
   * exchange writes them back unchanged before the `data` lines, so hooks read them, never change
   * them (the response cache keeps them with a captured stream). written by: core
   */
  readonly otherLines?: readonly string[]
}

/**
 * Fires once when the client disconnects. EventEmitter-shaped so undici takes it as a `signal`
 * (see `AbortSource` in core/ports.ts for why it is not an AbortController).
 */
export class ClientAbort {
  aborted = false
  reason: unknown = undefined
  #listeners: Array<() => void> = []

  on(_event: 'abort', listener: () => void): this {
    this.#listeners.push(listener)
    return this
  }

  /** Same as `on`: the event fires at most once. */
  once(event: 'abort', listener: () => void): this {
    return this.on(event, listener)
  }

  removeListener(_event: 'abort', listener: () => void): this {
    const index = this.#listeners.indexOf(listener)
    if (index >= 0) this.#listeners.splice(index, 1)
    return this
  }

  /** Marks the request aborted and calls every listener once. */
  abort(): void {
    if (this.aborted) return
    this.aborted = true
    this.reason = new Error('The client closed the connection')
    const listeners = this.#listeners
    this.#listeners = []
    for (const listener of listeners) listener()
  }
}

/** `x-gateway-cache-status` values (API.md §2). */
export type CacheHeaderStatus = 'HIT' | 'MISS' | 'REFRESH' | 'DISABLED'

/**
 * An upstream attempt (API.md §4). A request routed by a config may go upstream more than once:
 * retries of a target, fallback to the next one, a load-balanced or conditional pick. Each try is an
 * `Attempt`. The terminal plugin (forward) makes them and, for each, runs the group's `onAttempt`
 * hooks through the `AttemptGate` the pipeline hands it (core/plugin.ts):
 *
 * - virtual-key resolves the target's virtual key into `attempt.credential` / `attempt.virtualKey`;
 * - rate-limit and budget check and hold that virtual key's limits for this attempt;
 * - cache answers from the response cache (a `Reply`) or notes the key to store the answer under.
 *
 * A hook refuses an attempt by returning a `GatewayError` (the router counts it as a failed attempt,
 * with the error's status, and moves on as for an upstream failure: a 429 or 412 of our own limits
 * falls back like a provider's) or serves it by returning a `Reply` (a cache hit). When an attempt
 * is not the one whose reply goes to the client (refused, failed, retried), `onAttemptEnd` runs for
 * every plugin whose `onAttempt` ran for it, so holds are released at once. The served attempt is
 * `ctx.attempt`; its holds are settled in `onLog` with the real usage, like a request's.
 *
 * A request without a config makes no `Attempt`: its single upstream call is admitted by the
 * request-level hooks (onRequest, onAccess), so none of this runs on the fast path.
 */
export class Attempt {
  /** 0 for the request's first attempt; counts every retry and fallback. written by: forward */
  readonly index: number
  /** The config leaf tried. written by: forward */
  readonly target: RoutingTarget
  /** Which try of its target this is (0: the first, n: the n-th retry). written by: forward */
  readonly retry: number
  /** The JSON body sent: the request's with the target's `override_params` (`null` on non-JSON routes). written by: forward */
  readonly body: JsonObject | null
  /** The bytes sent. written by: forward */
  readonly rawBody: Buffer | null
  /** The provider and credential of the target's virtual key. written by: virtual-key */
  credential: ProviderCredential | null = null
  /** The target's virtual key's limits. written by: virtual-key */
  virtualKey: LimitSubject | null = null
  /** What rate-limit took for the virtual key for this attempt. written by: rate-limit */
  rateLimitHold: RateLimitHold | null = null
  /** What budget reserved for the virtual key for this attempt. written by: budget */
  budgetHold: BudgetHold | null = null
  /** The response-cache key of this attempt's request, when its target caches. written by: cache */
  cacheKey: string | null = null
  /** How the response cache took part. written by: cache */
  cacheStatus: CacheHeaderStatus | null = null
  /** Upstream status, the status of the gateway's own refusal, or 0 when no status came (connection failure, timeout). written by: forward */
  status = 0
  /** Why the attempt failed (`null` when it was served or failed with a provider status). written by: forward */
  error: GatewayError | null = null
  /** How many `onAttempt` hooks ran for it (the first `onAttemptEnd` hooks to call). written by: core (the gate) */
  hooksRan = 0
  /** Monotonic start and end (`performance.now()`); `endedAt` once the status is known. written by: forward */
  readonly startedAt: number
  endedAt: number | null = null

  constructor(init: { index: number; target: RoutingTarget; retry: number; body: JsonObject | null; rawBody: Buffer | null; startedAt: number }) {
    this.index = init.index
    this.target = init.target
    this.retry = init.retry
    this.body = init.body
    this.rawBody = init.rawBody
    this.startedAt = init.startedAt
  }
}

export class RequestContext {
  /** Unique id (UUID v4). written by: core */
  readonly requestId: string
  /** `x-gateway-trace-id` from the client, or the request id. written by: core */
  readonly traceId: string
  /** Wall-clock arrival time (epoch ms). written by: core */
  readonly receivedAt: number
  /** Monotonic arrival time (`performance.now()`). written by: core */
  readonly startedAt: number
  readonly method: HttpMethod
  /** Path without query string. */
  readonly path: string
  /** Raw query string without `?` (may be empty). */
  readonly query: string
  /** Request headers, names lower-cased; a header sent on several lines keeps every value, joined in order with `, ` (`; ` for `cookie`, RFC 9110 §5.3). written by: core */
  readonly headers: Readonly<Record<string, string>>
  /**
   * Client address as text, captured on Admin API routes (audit entries need it); `null` on the
   * data plane, where nothing reads it and uWS's address lookup costs a few µs per request
   * (7% of the forward-only profile). written by: core
   */
  readonly clientIp: string | null
  readonly route: RouteSpec
  /** Path parameters of the matched route. */
  readonly params: Readonly<Record<string, string>>
  /** Aborted when the client disconnects; pass it to every upstream call. written by: core */
  readonly signal: ClientAbort

  /** Request body bytes (null for routes without a body). written by: core; prompt-render (the rendered request, on prompt routes) */
  rawBody: Buffer | null = null
  /** Parsed JSON body for `json` routes. written by: core; prompt-render (the rendered request, on prompt routes) */
  body: JsonObject | null = null
  /**
   * `x-gateway-metadata`, checked (a JSON object of at most 64 string values, see
   * core/json-metadata.ts); `null` when the header is absent, and on routes outside the data plane.
   * A bad header never gets this far: the request is refused with 400. written by: core (pipeline)
   */
  metadata: Readonly<Record<string, string>> | null = null
  /** The authenticated caller. written by: auth */
  principal: Principal | null = null
  /**
   * The secret the caller authenticated with (API key or JWT), for this request only: the principal
   * is cached and shared between requests, so it must never hold it. Forward drops every header
   * whose value carries it, so the gateway credential never reaches a provider. Never logged or
   * stored: when auth refused a JWT, the audit plugin reads only its unverified organisation and
   * subject claims, to file the refusal's audit entry.
   * written by: auth
   */
  gatewayCredential: string | null = null
  /** Where the request goes upstream. written by: forward */
  target: UpstreamTarget | null = null
  /** The model named by the request (for logs and limits). written by: forward */
  model: string | null = null
  /** Whether the client asked for a stream. written by: forward */
  streaming = false
  /** Token usage, when the provider reported it. written by: forward (in onLog, from the reply) */
  usage: Usage | null = null
  /** The error sent to the client, if the reply was an error. written by: core */
  error: GatewayError | null = null
  /** Status sent to the client (0 until sent). written by: core */
  status = 0
  /** Monotonic time the first response byte was written. written by: core */
  firstByteAt: number | null = null
  /** Monotonic time the reply ended (or was aborted). written by: core */
  endedAt: number | null = null
  /** How the exchange ended. written by: core */
  outcome: Outcome | null = null
  /**
   * The last bytes of the response body (at most 16 KiB), for usage extraction and the logged body.
   * For a whole (not streamed) body it is a view on the reply's bytes, so it is readable during
   * onLog only (the pipeline clears it afterwards). written by: core
   */
  responseTail: Buffer | null = null
  /** Whether the response body was longer than `responseTail` (only its end was kept). written by: core */
  responseTailCut = false
  /**
   * What an Admin API action did, for the audit log: whether its entry is already stored (with the
   * change, in one transaction) and which workspace and resource it touched. written by: admin-api
   */
  adminAction: AdminActionNote | null = null
  /** The provider and credential chosen by `x-gateway-virtual-key`; forward uses it instead of the headers. written by: virtual-key */
  credential: ProviderCredential | null = null
  /** The virtual key's limits, checked with the principal's. written by: virtual-key */
  virtualKey: LimitSubject | null = null
  /** What the rate limiter took before forwarding, charged with the real usage after. written by: rate-limit */
  rateLimitHold: RateLimitHold | null = null
  /** Rate limits left for the budget plugin's ledger call to check (see `LimitCoordination`). written by: rate-limit */
  rateLimitClaim: RateLimitClaim | null = null
  /** The budget reserved before forwarding, settled with the real cost after. written by: budget */
  budgetHold: BudgetHold | null = null
  /**
   * The prompt template this request runs (prompt routes only; `null` elsewhere). Written in
   * onRequest; in onAccess the same plugin replaces `body`/`rawBody` with the rendered request, so
   * the limits and forward see what goes upstream. written by: prompt-render
   */
  prompt: PromptRun | null = null
  /**
   * The config this request is routed by (`x-gateway-config`, a saved slug or inline JSON, or the API
   * key's default config), compiled; `null` without one. written by: config
   */
  routing: RoutingPlan | null = null
  /** Every upstream attempt of a config-routed request, in order (`null` without a config). written by: forward */
  attempts: Attempt[] | null = null
  /** The attempt whose reply went to the client (`null` without a config, or when none did). written by: forward */
  attempt: Attempt | null = null

  constructor(init: {
    requestId: string
    traceId: string
    receivedAt: number
    startedAt: number
    method: HttpMethod
    path: string
    query: string
    headers: Readonly<Record<string, string>>
    clientIp: string | null
    route: RouteSpec
    params: Readonly<Record<string, string>>
    signal: ClientAbort
  }) {
    this.requestId = init.requestId
    this.traceId = init.traceId
    this.receivedAt = init.receivedAt
    this.startedAt = init.startedAt
    this.method = init.method
    this.path = init.path
    this.query = init.query
    this.headers = init.headers
    this.clientIp = init.clientIp
    this.route = init.route
    this.params = init.params
    this.signal = init.signal
  }
}
