/** Builds a request's log record from its finished context (pure). */
import type { RequestContext } from '../../core/context.js'
import type { LogRecord } from '../../core/ports.js'

/** Parses `x-gateway-metadata` (a JSON object of strings); anything else yields `null`. */
export function parseMetadata(raw: string | undefined, maxBytes: number): Record<string, string> | null {
  if (raw === undefined || raw.length === 0 || raw.length > maxBytes) return null
  let parsed: unknown
  try {
    parsed = JSON.parse(raw)
  } catch {
    return null
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return null
  const metadata: Record<string, string> = {}
  for (const [key, value] of Object.entries(parsed)) {
    if (typeof value === 'string') metadata[key] = value
    else if (typeof value === 'number' || typeof value === 'boolean') metadata[key] = String(value)
  }
  return metadata
}

export function toLogRecord(ctx: RequestContext, maxMetadataBytes: number): LogRecord {
  const endedAt = ctx.endedAt ?? ctx.startedAt
  return {
    id: ctx.requestId,
    traceId: ctx.traceId,
    createdAt: ctx.receivedAt,
    organisationId: ctx.principal?.organisationId ?? null,
    workspaceId: ctx.principal?.workspaceId ?? null,
    // A JWT's keyId is the token's subject, not an API key id.
    apiKeyId: ctx.principal?.kind === 'api-key' ? ctx.principal.keyId : null,
    method: ctx.method,
    route: ctx.route.id,
    path: ctx.path,
    provider: ctx.target?.provider ?? null,
    model: ctx.model,
    status: ctx.status,
    outcome: ctx.outcome ?? 'aborted',
    streaming: ctx.streaming,
    latencyMs: endedAt - ctx.startedAt,
    ttfbMs: ctx.firstByteAt === null ? null : ctx.firstByteAt - ctx.startedAt,
    usage: ctx.usage,
    errorCode: ctx.error?.code ?? null,
    metadata: parseMetadata(ctx.headers['x-gateway-metadata'], maxMetadataBytes),
  }
}
