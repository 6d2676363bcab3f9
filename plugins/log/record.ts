/** Builds a request's log record from its finished context (pure apart from the price lookup). */
import { costNanoUsd, type PriceTable } from '../../core/budgets.js'
import type { Attempt, CacheHeaderStatus, RequestContext, Usage } from '../../core/context.js'
import { MAX_LOG_ATTEMPTS, type CacheStatus, type LogAttempt, type LogRecord } from '../../core/logs.js'

export interface RecordOptions {
  /** Longest `x-gateway-metadata` header whose pairs are stored; a longer one is stored as none. */
  readonly maxMetadataBytes: number
  readonly prices: PriceTable
  /** Bodies are kept up to this many bytes each; `null` keeps none. */
  readonly maxBodyBytes: number | null
}

/** Appended to a body cut at the size limit. */
const TRUNCATED_MARKER = '[truncated]'

/**
 * The request's metadata pairs as checked by core (`ctx.metadata`; a bad header was refused with
 * 400 before the request ran), or `null` when absent or when the header is longer than `maxBytes`.
 */
export function recordMetadata(ctx: Pick<RequestContext, 'metadata' | 'headers'>, maxBytes: number): Readonly<Record<string, string>> | null {
  const metadata = ctx.metadata
  if (metadata === null) return null
  return (ctx.headers['x-gateway-metadata']?.length ?? 0) > maxBytes ? null : metadata
}

/** Cost in nano-USD: `null` without usage, 0 for a model the price table does not list. */
export function recordCost(prices: PriceTable, provider: string | null, model: string | null, usage: Usage | null): number | null {
  if (usage === null) return null
  if (model === null) return 0
  const price = prices.find(provider, model)
  return price === null ? 0 : costNanoUsd(price, usage)
}

/**
 * The first `maxBytes` bytes of `bytes` as text, marked at the end when cut; `startCut` says the
 * bytes are only the end of the body (the response tail), marked at the start.
 */
export function cappedBody(bytes: Buffer | null, maxBytes: number, startCut = false): string | null {
  if (bytes === null) return null
  const text = bytes.length <= maxBytes ? bytes.toString('utf8') : `${bytes.toString('utf8', 0, maxBytes)}${TRUNCATED_MARKER}`
  return startCut ? `${TRUNCATED_MARKER}${text}` : text
}

/** `x-gateway-cache-status` value → the log's cache status. */
export function logCacheStatus(status: CacheHeaderStatus): CacheStatus {
  switch (status) {
    case 'HIT':
      return 'hit'
    case 'MISS':
      return 'miss'
    case 'REFRESH':
      return 'refresh'
    default:
      return 'disabled'
  }
}

/**
 * An attempt's provider: its virtual key's, else the target's. A target naming neither keeps the
 * request's own provider selection, which is the upstream's; a virtual key that was refused
 * before it resolved names no provider (`null`).
 */
function attemptProvider(ctx: RequestContext, attempt: Attempt): string | null {
  if (attempt.credential !== null) return attempt.credential.provider
  const target = attempt.target
  if (target.provider !== null) return target.provider
  return target.virtualKey === null ? (ctx.target?.provider ?? null) : null
}

function logAttempt(ctx: RequestContext, attempt: Attempt): LogAttempt {
  return {
    target: attempt.target.path,
    provider: attemptProvider(ctx, attempt),
    virtual_key: attempt.credential?.virtualKeySlug ?? attempt.target.virtualKey,
    status: attempt.status,
    latency_ms: attempt.endedAt === null ? null : attempt.endedAt - attempt.startedAt,
    retry: attempt.retry,
    error_code: attempt.error?.code ?? null,
    cache_status: attempt.cacheStatus === null ? null : logCacheStatus(attempt.cacheStatus),
  }
}

/**
 * Whether the request's only attempt was at a config without targets: then the record's own fields
 * (provider, virtual key, status, latency, cache status; retry 0, fallback index 0) are that attempt,
 * and logging it again would only cost every such request a JSON array (about 13 µs of CPU per
 * request in the embedded log store, measured).
 */
function soleAttempt(routing: RequestContext['routing'], attempts: readonly Attempt[]): boolean {
  return attempts.length === 1 && routing !== null && routing.root.kind === 'target'
}

/** The attempts as logged: all of them up to `MAX_LOG_ATTEMPTS`, else the first ones and the last. */
export function logAttempts(ctx: RequestContext, attempts: readonly Attempt[]): LogAttempt[] {
  const count = attempts.length
  if (count <= MAX_LOG_ATTEMPTS) return attempts.map((attempt) => logAttempt(ctx, attempt))
  const kept = attempts.slice(0, MAX_LOG_ATTEMPTS - 1).map((attempt) => logAttempt(ctx, attempt))
  kept.push(logAttempt(ctx, attempts[count - 1] as Attempt))
  return kept
}

/**
 * How many targets the router moved past before `answering`'s: every target's first try has
 * `retry` 0, and the router never returns to a target it left.
 */
export function fallbackIndexOf(attempts: readonly Attempt[], answering: Attempt): number | null {
  const position = attempts.indexOf(answering)
  if (position < 0) return null
  let targets = 0
  for (let index = 0; index <= position; index += 1) if ((attempts[index] as Attempt).retry === 0) targets += 1
  return Math.max(0, targets - 1)
}

/** The attempt's model when its body names one (`override_params` may change it), else the request's. */
function attemptModel(ctx: RequestContext, attempt: Attempt): string | null {
  const model = attempt.body?.model
  return typeof model === 'string' ? model : ctx.model
}

/**
 * The attempt the client's answer came from: the served one, else (every attempt failed or was
 * refused) the last one, whose reply or error went out with its `x-gateway-last-used-option-index`.
 */
function answeringAttempt(ctx: RequestContext): Attempt | null {
  if (ctx.attempt !== null) return ctx.attempt
  const attempts = ctx.attempts
  return attempts === null || attempts.length === 0 ? null : (attempts[attempts.length - 1] as Attempt)
}

/**
 * The request's record. For a config-routed request it also carries the config's slug and
 * version and every attempt, and the virtual key, provider, model (hence cost), cache status and
 * fallback index are those of the attempt the answer came from (`answeringAttempt`). Without a
 * config (`ctx.routing`, `ctx.attempts` and `ctx.attempt` all `null`) that costs a few null checks.
 */
export function toLogRecord(ctx: RequestContext, options: RecordOptions): LogRecord {
  const endedAt = ctx.endedAt ?? ctx.startedAt
  const metadata = recordMetadata(ctx, options.maxMetadataBytes)
  const routing = ctx.routing
  const attempts = ctx.attempts
  const answering = routing === null ? null : answeringAttempt(ctx)
  const provider = answering === null ? (ctx.target?.provider ?? null) : attemptProvider(ctx, answering)
  const model = answering === null ? ctx.model : attemptModel(ctx, answering)
  const usage = ctx.usage
  const error = ctx.error
  const maxBodyBytes = options.maxBodyBytes
  return {
    id: ctx.requestId,
    traceId: ctx.traceId,
    source: 'gateway',
    createdAt: ctx.receivedAt,
    organisationId: ctx.principal?.organisationId ?? null,
    workspaceId: ctx.principal?.workspaceId ?? null,
    // A JWT's keyId is the token's subject, not an API key id.
    apiKeyId: ctx.principal?.kind === 'api-key' ? ctx.principal.keyId : null,
    user: metadata?._user ?? null,
    virtualKey: answering === null ? (ctx.credential?.virtualKeySlug ?? null) : (answering.credential?.virtualKeySlug ?? answering.target.virtualKey),
    config: routing === null ? null : routing.slug,
    configVersion: routing === null ? null : routing.version,
    promptSlug: ctx.prompt?.slug ?? null,
    promptVersion: ctx.prompt?.version ?? null,
    method: ctx.method,
    route: ctx.route.id,
    path: ctx.path,
    provider,
    model,
    status: ctx.status,
    outcome: ctx.outcome ?? 'aborted',
    streaming: ctx.streaming,
    latencyMs: endedAt - ctx.startedAt,
    ttftMs: ctx.firstByteAt === null ? null : ctx.firstByteAt - ctx.startedAt,
    promptTokens: usage?.promptTokens ?? null,
    completionTokens: usage?.completionTokens ?? null,
    totalTokens: usage?.totalTokens ?? null,
    cachedTokens: usage?.cachedTokens ?? null,
    costNanoUsd: recordCost(options.prices, provider, model, usage),
    cacheStatus: answering === null || answering.cacheStatus === null ? 'disabled' : logCacheStatus(answering.cacheStatus),
    retryCount: attempts === null || attempts.length === 0 ? 0 : attempts.length - 1,
    fallbackIndex: attempts === null || answering === null ? null : fallbackIndexOf(attempts, answering),
    errorCode: error?.code ?? null,
    errorType: error?.type ?? null,
    metadata,
    requestBody: maxBodyBytes === null ? null : cappedBody(ctx.rawBody, maxBodyBytes),
    responseBody: maxBodyBytes === null ? null : cappedBody(ctx.responseTail, maxBodyBytes, ctx.responseTailCut),
    attempts: attempts === null || attempts.length === 0 || soleAttempt(routing, attempts) ? null : logAttempts(ctx, attempts),
  }
}
