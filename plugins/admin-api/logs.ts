/**
 * Custom logs and reading one log (reference §14):
 * - `POST /v1/logs` (scopes `logs.write` and `completions.write`, both, as documented): one
 *   CustomLog or an array (at most 100) of requests made outside the gateway, stored as log records
 *   with source `custom` in the caller's workspace, so analytics, feedback and exports see them.
 *   Headers are accepted but not stored (they carry credentials); the URL is kept without query
 *   string or credentials; bodies (at most 1 MiB of JSON each) and metadata are stored with
 *   credential-looking fields and gateway key secrets masked (`maskSecrets`, which also cuts
 *   anything nested deeper than 20 levels), so neither the log store nor its write-ahead log or
 *   journal ever holds them in clear. No cost is computed.
 * - `GET /v1/logs/{id}` (`logs.read`, `logs.view`, `logs.write` or `completions.write`): a log by
 *   request id or trace id, within the caller's workspace (organisation keys: the organisation).
 *   Bodies are shown only when stored, masked again on the way out (records written before
 *   bodies were masked on write, and gateway records); headers never.
 * Records are written in batches: a log not found yet makes the sink flush once before the 404.
 */
import { randomUUID } from 'node:crypto'
import { z } from 'zod'
import { maskSecrets } from '../../core/audit.js'
import { ERRORS, gatewayError, type GatewayError } from '../../core/errors.js'
import type { LogRecord, StoredLog } from '../../core/logs.js'
import { jsonReply, type Reply } from '../../core/plugin.js'
import { logServicesOf } from './analytics.js'
import { callerScope } from './feedback.js'
import { METADATA_KEY, TRACE_ID } from './log-filters.js'
import { notFound, parseOneOrMany, type AdminDeps, type AdminRequest, type HandlerMap } from './request.js'

/** Logs of one `POST /v1/logs`. */
export const MAX_CUSTOM_LOGS = 100
/** Characters of JSON per request or response body. */
export const MAX_CUSTOM_BODY_CHARS = 1_048_576
/** 1 cent = 10⁷ nano-USD. */
const NANO_USD_PER_CENT = 10_000_000

const headers = z.record(z.string().max(256), z.unknown()).optional().describe('Accepted but not stored (headers carry credentials)')
const body = z
  .union([z.string(), z.record(z.string(), z.unknown()), z.array(z.unknown())])
  .refine((value) => JSON.stringify(value).length <= MAX_CUSTOM_BODY_CHARS, `must be at most ${MAX_CUSTOM_BODY_CHARS} characters of JSON`)

export const customLog = z
  .object({
    request: z
      .object({
        url: z.url({ protocol: /^https?$/ }).max(8192),
        method: z
          .string()
          .regex(/^[A-Za-z]{1,16}$/, 'must be an HTTP method')
          .transform((method) => method.toUpperCase())
          .default('POST'),
        headers,
        body,
      })
      .strict(),
    response: z
      .object({
        status: z.number().int().min(100).max(599).default(200),
        headers,
        body,
        response_time: z.number().min(0).max(86_400_000).optional().describe('Milliseconds'),
      })
      .strict(),
    metadata: z
      .record(z.string().regex(METADATA_KEY, 'keys are letters, digits and _ . : @ / - (at most 128)'), z.union([z.string().max(1024), z.number(), z.boolean()]))
      .refine((metadata) => Object.keys(metadata).length <= 50, 'at most 50 pairs')
      .refine((metadata) => metadata.trace_id === undefined || (typeof metadata.trace_id === 'string' && TRACE_ID.test(metadata.trace_id)), 'trace_id must be 1-128 visible ASCII characters without commas')
      .optional()
      .describe('trace_id, span_id, span_name, _user and any string pairs'),
  })
  .strict()

export const customLogBatch = z.array(customLog).min(1).max(MAX_CUSTOM_LOGS)
/** For the OpenAPI document; the handler validates each shape on its own (`parseOneOrMany`). */
export const createLogsBody = z.union([customLog, customLogBatch])

type CustomLog = z.output<typeof customLog>

function objectOf(value: unknown): Record<string, unknown> | null {
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : null
}

function count(value: unknown): number | null {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : null
}

/** Origin and path only: query strings and user-info may hold credentials. */
function safeUrl(url: string): string {
  const parsed = new URL(url)
  return `${parsed.origin}${parsed.pathname}`
}

/** The registry's provider whose base URL has this host, if any. */
function providerOf(deps: AdminDeps, url: string): string | null {
  const host = new URL(url).host
  for (const provider of deps.registry.list()) {
    if (provider.baseUrl.length === 0) continue
    try {
      if (new URL(provider.baseUrl).host === host) return provider.slug
    } catch {
      // A provider without a parseable base URL cannot match.
    }
  }
  return null
}

/** Metadata pairs as strings, a credential-looking pair (`api_key`, a `gw-…` secret) masked. */
function stringMetadata(metadata: CustomLog['metadata']): Record<string, string> | null {
  if (metadata === undefined) return null
  const values: Record<string, string> = {}
  for (const [key, value] of Object.entries(metadata)) if (key !== 'trace_id') values[key] = String(value)
  return Object.keys(values).length === 0 ? null : (maskSecrets(values) as Record<string, string>)
}

/** A CustomLog → the log record stored for it. */
export function customLogRecord(deps: AdminDeps, principal: AdminRequest['principal'], log: CustomLog, now: number): LogRecord {
  const id = randomUUID()
  const requestBody = objectOf(log.request.body)
  const responseBody = objectOf(log.response.body)
  const usage = objectOf(responseBody?.usage)
  const model = requestBody?.model ?? responseBody?.model
  const status = log.response.status
  const metadata = stringMetadata(log.metadata)
  return {
    id,
    traceId: typeof log.metadata?.trace_id === 'string' ? log.metadata.trace_id : id,
    source: 'custom',
    createdAt: now,
    organisationId: principal.organisationId,
    workspaceId: principal.workspaceId,
    apiKeyId: null,
    user: metadata?._user ?? null,
    virtualKey: null,
    config: null,
    configVersion: null,
    promptSlug: null,
    promptVersion: null,
    method: log.request.method,
    route: 'custom',
    path: safeUrl(log.request.url),
    provider: providerOf(deps, log.request.url),
    model: typeof model === 'string' ? model.slice(0, 200) : null,
    status,
    outcome: status < 400 ? 'completed' : 'errored',
    streaming: requestBody?.stream === true,
    latencyMs: Math.round(log.response.response_time ?? 0),
    ttftMs: null,
    promptTokens: count(usage?.prompt_tokens),
    completionTokens: count(usage?.completion_tokens),
    totalTokens: count(usage?.total_tokens),
    cachedTokens: count(objectOf(usage?.prompt_tokens_details)?.cached_tokens),
    costNanoUsd: null,
    cacheStatus: 'disabled',
    retryCount: 0,
    fallbackIndex: null,
    errorCode: null,
    errorType: null,
    metadata,
    requestBody: JSON.stringify(maskSecrets(log.request.body)),
    responseBody: JSON.stringify(maskSecrets(log.response.body)),
    attempts: null,
  }
}

async function createLogs({ ctx, principal, deps }: AdminRequest): Promise<Reply | GatewayError> {
  const ports = logServicesOf(deps)
  if (!ports.ok) return ports.error
  // Documented as needing both; the route admits `logs.write`, this adds the other.
  if (!principal.scopes.has('completions.write')) return gatewayError(ERRORS.GW_SCOPE_MISSING, 'Inserting logs needs both logs.write and completions.write')
  const parsed = parseOneOrMany(ctx, customLog, customLogBatch)
  if (!parsed.ok) return parsed.error
  const logs = Array.isArray(parsed.value) ? parsed.value : [parsed.value]
  const now = deps.clock.now()
  const records = logs.map((log) => customLogRecord(deps, principal, log, now))
  for (const record of records) ports.value.sink.enqueue(record)
  return jsonReply(200, { success: true, message: records.length === 1 ? 'log saved' : `${records.length} logs saved`, log_ids: records.map((record) => record.id) })
}

/** A stored body as JSON when it parses (credential-looking fields masked), else the text. */
export function bodyView(text: string | null): unknown {
  if (text === null) return null
  try {
    return maskSecrets(JSON.parse(text))
  } catch {
    return text
  }
}

export function centsOf(nanoUsd: number | null): number | null {
  return nanoUsd === null ? null : nanoUsd / NANO_USD_PER_CENT
}

/**
 * A stored log on the wire (LogObject, reference §14). Headers are never stored, so never shown.
 * A config-routed request's `metrics.attempts` lists every upstream attempt in order (`{target,
 * provider, virtual_key, status, latency_ms, retry, error_code, cache_status}`); `null` otherwise.
 */
export function logView(log: StoredLog, workspaceSlug: string | null): Record<string, unknown> {
  return {
    _id: log.id,
    request: { url: log.path, method: log.method, body: bodyView(log.requestBody) },
    response: { status: log.status, body: bodyView(log.responseBody), responseTime: log.latencyMs },
    metrics: {
      source: log.source,
      route: log.route,
      ai_org: log.provider,
      ai_model: log.model,
      req_units: log.promptTokens,
      res_units: log.completionTokens,
      total_units: log.totalTokens,
      cached_units: log.cachedTokens,
      cost: centsOf(log.costNanoUsd),
      cost_currency: 'USD',
      response_status_code: log.status,
      is_success: log.status < 400 && log.outcome === 'completed',
      outcome: log.outcome,
      response_time: log.latencyMs,
      ttft: log.ttftMs,
      stream: log.streaming,
      cache_status: log.cacheStatus,
      retry_count: log.retryCount,
      fallback_index: log.fallbackIndex,
      error_code: log.errorCode,
      error_type: log.errorType,
      trace_id: log.traceId,
      virtual_key: log.virtualKey,
      config: log.config,
      config_version: log.configVersion,
      attempts: log.attempts,
      prompt_slug: log.promptSlug,
      prompt_version: log.promptVersion,
      workspace_slug: workspaceSlug,
      api_key_id: log.apiKeyId,
      user: log.user,
      metadata: log.metadata ?? {},
      weighted_feedback: log.weightedFeedback,
    },
    organisation_id: log.organisationId,
    created_at: new Date(log.createdAt).toISOString(),
  }
}

/** The slug of a workspace UUID (the UUID itself once the workspace is gone). */
export async function workspaceSlugOf(deps: AdminDeps, organisationId: string, workspaceId: string | null): Promise<string | null> {
  if (workspaceId === null) return null
  const workspace = await deps.store.findWorkspace(organisationId, workspaceId)
  return workspace?.id === workspaceId ? workspace.slug : workspaceId
}

async function getLog({ ctx, principal, deps }: AdminRequest): Promise<Reply | GatewayError> {
  const logs = logServicesOf(deps)
  if (!logs.ok) return logs.error
  const { analytics, sink } = logs.value
  const id = ctx.params.logId ?? ''
  if (!TRACE_ID.test(id)) return notFound('log')
  const scope = callerScope(principal)
  let log = await analytics.findLog(scope, id)
  if (log === null) {
    await sink.flush()
    log = await analytics.findLog(scope, id)
  }
  if (log === null) return notFound('log')
  return jsonReply(200, logView(log, await workspaceSlugOf(deps, principal.organisationId, log.workspaceId)))
}

export const logHandlers: HandlerMap = {
  'logs.create': createLogs,
  'logs.get': getLog,
}
