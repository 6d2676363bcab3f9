/** Builds a request's log record from its finished context (pure apart from the price lookup). */
import { costNanoUsd, type PriceTable } from '../../core/budgets.js'
import type { RequestContext, Usage } from '../../core/context.js'
import type { LogRecord } from '../../core/logs.js'

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

export function toLogRecord(ctx: RequestContext, options: RecordOptions): LogRecord {
  const endedAt = ctx.endedAt ?? ctx.startedAt
  const metadata = recordMetadata(ctx, options.maxMetadataBytes)
  const provider = ctx.target?.provider ?? null
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
    virtualKey: ctx.credential?.virtualKeySlug ?? null,
    config: null,
    promptSlug: ctx.prompt?.slug ?? null,
    promptVersion: ctx.prompt?.version ?? null,
    method: ctx.method,
    route: ctx.route.id,
    path: ctx.path,
    provider,
    model: ctx.model,
    status: ctx.status,
    outcome: ctx.outcome ?? 'aborted',
    streaming: ctx.streaming,
    latencyMs: endedAt - ctx.startedAt,
    ttftMs: ctx.firstByteAt === null ? null : ctx.firstByteAt - ctx.startedAt,
    promptTokens: usage?.promptTokens ?? null,
    completionTokens: usage?.completionTokens ?? null,
    totalTokens: usage?.totalTokens ?? null,
    cachedTokens: usage?.cachedTokens ?? null,
    costNanoUsd: recordCost(options.prices, provider, ctx.model, usage),
    cacheStatus: 'disabled',
    retryCount: 0,
    fallbackIndex: null,
    errorCode: error?.code ?? null,
    errorType: error?.type ?? null,
    metadata,
    requestBody: maxBodyBytes === null ? null : cappedBody(ctx.rawBody, maxBodyBytes),
    responseBody: maxBodyBytes === null ? null : cappedBody(ctx.responseTail, maxBodyBytes, ctx.responseTailCut),
  }
}
