/**
 * Log exports (`/v1/logs/exports…`, reference §14; scope `logs.export`): a job that writes the logs
 * matching `filters` as JSON Lines, one object per log holding only the `requested_data` fields.
 *
 * Lifecycle: create → `draft`; `start` → `in_progress`, run in the background by this instance
 * (`LogAnalytics.scanLogs`, oldest first, at most `page_size` ≤ 50000 logs from `current_page`);
 * then `success`, `failed` (the reason in `error`) or `stopped` (`cancel`). Starting again re-runs
 * it; updating a job that is not running puts it back to `draft`. A running job cannot be updated
 * or started (409). `download` answers `{signed_url}`: a link to `GET /v1/logs/exports/{id}/file`
 * with an expiry and an HMAC-SHA256 signature under the job's own random key (public route: the
 * signature is the credential; restarting the job changes the key, so old links stop working).
 *
 * Visibility: a workspace key sees and runs only its workspace's exports (others are not found);
 * an organisation key sees all of its organisation's, and creates them for the workspace named by
 * `workspace_id` or `filters.workspace_slug`, or for the whole organisation. On get, download,
 * start and cancel an optional `workspace_id` (query; body on start and cancel) must name the
 * export's workspace, else 404 (access.ts `checkNamedWorkspace`; an organisation-wide export lives
 * in no workspace). On update, `workspace_id` is a field of the export: it moves the export to
 * that workspace (organisation keys; a workspace key may name only its own).
 */
import { createHmac, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto'
import { z } from 'zod'
import type { Principal } from '../../core/context.js'
import { ERRORS, GatewayError, gatewayError } from '../../core/errors.js'
import { EXPORT_FIELDS, type ExportField, type ExportRecord, type ExportStore } from '../../core/log-exports.js'
import type { LogAnalytics, StoredLog } from '../../core/logs.js'
import { jsonReply, type Reply } from '../../core/plugin.js'
import { checkNamedWorkspace } from './access.js'
import { logServicesOf } from './analytics.js'
import { bodyView, centsOf, workspaceSlugOf } from './logs.js'
import {
  exportFilterFields,
  exportFilterValues,
  logScopeOf,
  parseFilterInput,
  toLogFilter,
  UUID,
  type FilterInput,
} from './log-filters.js'
import {
  invalid,
  noteAction,
  notFound,
  nowIso,
  pageOf,
  parseBody,
  parseQuery,
  type AdminDeps,
  type AdminRequest,
  type Handler,
  type Outcome,
  type PublicRequest,
  type HandlerMap,
  type PublicHandlerMap,
} from './request.js'
import { snakePaging, workspaceIdBody, workspaceIdField } from './schemas.js'
import { listView } from './views.js'

/** Logs read from the store per batch while exporting. */
const EXPORT_BATCH = 1000

const requestedData = z
  .array(z.enum(EXPORT_FIELDS))
  .min(1)
  .max(EXPORT_FIELDS.length)
  .refine((fields) => new Set(fields).size === fields.length, 'must not repeat a field')
  .describe(`Fields written per log: ${EXPORT_FIELDS.join(', ')}`)

const filters = z
  .record(z.string(), z.unknown())
  .describe(
    'The analytics filters (time_of_generation_min/max required, the range at most 366 days; status_code, virtual_keys, configs, api_key_ids, ai_org_model, ai_model, ' +
      'trace_id, prompt_slug, cache_status, metadata, cost/token/feedback ranges, workspace_slug) as strings, numbers or lists; plus page_size (≤ 50000, default 50000) and current_page',
  )

export const createExportBody = z
  .object({
    workspace_id: z.string().min(1).max(200).optional().describe('Organisation keys: the workspace (slug or UUID) whose logs to export; absent → filters.workspace_slug, else the whole organisation'),
    filters,
    requested_data: requestedData,
    description: z.string().max(2000).nullable().optional(),
  })
  .strict()

export const updateExportBody = z
  .object({
    workspace_id: z.string().min(1).max(200).optional(),
    filters: filters.optional(),
    requested_data: requestedData.optional(),
    description: z.string().max(2000).nullable().optional(),
  })
  .strict()

export const listExportsQuery = z.object({
  ...snakePaging,
  workspace_id: workspaceIdField.optional(),
})

export const exportFileQuery = z.object({
  expires: z.string().regex(/^[0-9]{1,12}$/),
  signature: z.string().regex(/^[A-Za-z0-9_-]{43}$/),
})

// ---------------------------------------------------------------------------------------------
// Views

async function exportView(deps: AdminDeps, record: ExportRecord): Promise<Record<string, unknown>> {
  return {
    object: 'export',
    id: record.id,
    organisation_id: record.organisationId,
    workspace_id: await workspaceSlugOf(deps, record.organisationId, record.workspaceId),
    filters: record.filters,
    requested_data: record.requestedData,
    description: record.description,
    status: record.status,
    total: record.total,
    error: record.error,
    created_by: record.createdBy,
    created_at: record.createdAt,
    last_updated_at: record.lastUpdatedAt,
  }
}

/** How a log's routing went, in the terms of a config's `mode`: `fallback` once the router moved past a target. */
function modeOf(log: StoredLog): string {
  if (log.fallbackIndex !== null && log.fallbackIndex > 0) return 'fallback'
  return log.retryCount > 0 ? 'retry' : 'single'
}

/** One exported line's object: exactly the requested fields. */
export function exportRow(log: StoredLog, fields: readonly ExportField[]): Record<string, unknown> {
  const row: Record<string, unknown> = {}
  for (const field of fields) {
    switch (field) {
      case 'id': row.id = log.id; break
      case 'trace_id': row.trace_id = log.traceId; break
      case 'created_at': row.created_at = new Date(log.createdAt).toISOString(); break
      case 'request': row.request = { url: log.path, method: log.method, body: bodyView(log.requestBody) }; break
      case 'response': row.response = { status: log.status, body: bodyView(log.responseBody), response_time: log.latencyMs }; break
      case 'is_success': row.is_success = log.status < 400 && log.outcome === 'completed'; break
      case 'ai_org': row.ai_org = log.provider; break
      case 'ai_model': row.ai_model = log.model; break
      case 'req_units': row.req_units = log.promptTokens; break
      case 'res_units': row.res_units = log.completionTokens; break
      case 'total_units': row.total_units = log.totalTokens; break
      case 'request_url': row.request_url = log.path; break
      case 'cost': row.cost = centsOf(log.costNanoUsd); break
      case 'cost_currency': row.cost_currency = 'USD'; break
      case 'response_time': row.response_time = log.latencyMs; break
      case 'response_status_code': row.response_status_code = log.status; break
      case 'mode': row.mode = modeOf(log); break
      case 'config': row.config = log.config; break
      case 'prompt_slug': row.prompt_slug = log.promptSlug; break
      case 'metadata': row.metadata = log.metadata ?? {}; break
    }
  }
  return row
}

// ---------------------------------------------------------------------------------------------
// Signed download links

function signatureOf(record: ExportRecord, expires: string): Buffer {
  return createHmac('sha256', Buffer.from(record.signingKey, 'base64url')).update(`${record.id}.${expires}`).digest()
}

export function signedPath(record: ExportRecord, expiresAtMs: number): string {
  const expires = String(Math.floor(expiresAtMs / 1000))
  return `/v1/logs/exports/${record.id}/file?expires=${expires}&signature=${signatureOf(record, expires).toString('base64url')}`
}

function newSigningKey(): string {
  return randomBytes(32).toString('base64url')
}

// ---------------------------------------------------------------------------------------------
// Jobs

interface Running {
  stopped: boolean
  /** Settles when the run has ended and recorded its end. */
  done: Promise<void>
}

/**
 * The export jobs this instance runs. A cancel marks the job `stopped` in the store first, then
 * tells the run, which drops its partial file; a run only records its end while the stored job is
 * still the `in_progress` version it started from, so a cancel is never overwritten.
 */
export class ExportJobs {
  readonly #deps: AdminDeps
  readonly #running = new Map<string, Running>()
  #closing = false

  constructor(deps: AdminDeps) {
    this.#deps = deps
  }

  get running(): number {
    return this.#running.size
  }

  /** Runs `record` (already stored as `in_progress`) in the background. */
  run(record: ExportRecord, analytics: LogAnalytics, store: ExportStore): void {
    const running: Running = { stopped: false, done: Promise.resolve() }
    this.#running.set(record.id, running)
    running.done = this.#execute(record, analytics, store, running).finally(() => {
      // A cancelled run may still be winding down when the export is started again.
      if (this.#running.get(record.id) === running) this.#running.delete(record.id)
    })
  }

  /** Stops the local run of an export, if any. */
  stop(id: string): void {
    const running = this.#running.get(id)
    if (running !== undefined) running.stopped = true
  }

  /** Stops every run and waits for them (the stored jobs end `failed`: interrupted). */
  async close(): Promise<void> {
    this.#closing = true
    const runs = [...this.#running.values()]
    for (const running of runs) running.stopped = true
    await Promise.all(runs.map((running) => running.done))
  }

  async #execute(record: ExportRecord, analytics: LogAnalytics, store: ExportStore, running: Running): Promise<void> {
    const logger = this.#deps.logger
    let writer: Awaited<ReturnType<ExportStore['openWriter']>> | null = null
    try {
      const values = parseFilterInput(record.filters, exportFilterFields)
      if (!values.ok) {
        await this.#finish(store, record, { status: 'failed', total: 0, error: values.error.message })
        return
      }
      const input = values.value as FilterInput & { current_page: number; page_size: number }
      const filter = toLogFilter(input, { organisationId: record.organisationId, workspaceId: record.workspaceId })
      const skip = input.current_page * input.page_size
      let seen = 0
      let written = 0
      const open = await store.openWriter(record.id)
      writer = open
      await analytics.scanLogs(filter, { batchSize: EXPORT_BATCH, limit: skip + input.page_size }, async (rows) => {
        if (running.stopped) return false
        const lines: string[] = []
        for (const row of rows) {
          if (seen++ < skip) continue
          lines.push(JSON.stringify(exportRow(row, record.requestedData)))
        }
        if (lines.length > 0) await open.write(`${lines.join('\n')}\n`)
        written += lines.length
        return !running.stopped
      })
      if (running.stopped) {
        await open.abort()
        writer = null
        if (this.#closing) await this.#finish(store, record, { status: 'failed', total: 0, error: 'interrupted: the gateway stopped while the export ran' })
        return
      }
      const current = await store.find(record.organisationId, record.id)
      if (current?.lastUpdatedAt !== record.lastUpdatedAt) {
        // Cancelled (or otherwise changed) while the last batch was written: its file is not kept.
        await open.abort()
        writer = null
        return
      }
      await open.commit()
      writer = null
      await this.#finish(store, record, { status: 'success', total: written, error: null })
    } catch (error) {
      logger.error({ err: error, exportId: record.id }, 'log export failed')
      if (writer !== null) await writer.abort().catch(() => undefined)
      await this.#finish(store, record, { status: 'failed', total: 0, error: 'reading the logs or writing the export file failed (see the gateway log)' }).catch((finishError: unknown) =>
        logger.error({ err: finishError, exportId: record.id }, 'log export status could not be stored'),
      )
    }
  }

  /** Records the run's end unless the job changed since it started (a cancel, another start). */
  async #finish(store: ExportStore, record: ExportRecord, end: Pick<ExportRecord, 'status' | 'total' | 'error'>): Promise<void> {
    const ended: ExportRecord = { ...record, ...end, lastUpdatedAt: nowIso(this.#deps, record.lastUpdatedAt) }
    await store.update(ended, record.lastUpdatedAt)
  }
}

// ---------------------------------------------------------------------------------------------
// Handlers

/** The export if the caller may see it: its organisation's, and for workspace keys its workspace's. */
async function visibleExport(store: ExportStore, principal: Principal, id: string | undefined): Promise<ExportRecord | null> {
  if (id === undefined || !UUID.test(id)) return null
  const record = await store.find(principal.organisationId, id.toLowerCase())
  if (record === null) return null
  if (principal.workspaceId !== null && record.workspaceId !== principal.workspaceId) return null
  return record
}

/**
 * The export of the path if the caller may see it and it lives in the `workspace_id` named (body
 * or query), if one is; else 404.
 */
async function pathExport(request: AdminRequest, store: ExportStore, namedInBody: string | undefined): Promise<ExportRecord | GatewayError> {
  const record = await visibleExport(store, request.principal, request.ctx.params.exportId)
  if (record === null) return notFound('export')
  return (await checkNamedWorkspace(request, namedInBody, record.workspaceId, 'export')) ?? record
}

function conflict(message: string): GatewayError {
  return gatewayError(ERRORS.GW_ADMIN_CONFLICT, message)
}

/**
 * Validated filters (stored as strings) and the workspace the export reads: a workspace key's own;
 * for an organisation key `workspace_id`, else `filters.workspace_slug`, else the organisation.
 */
async function exportTarget(
  deps: AdminDeps,
  principal: Principal,
  workspaceId: string | undefined,
  rawFilters: Readonly<Record<string, unknown>>,
): Promise<Outcome<{ filters: Record<string, string>; workspaceId: string | null }>> {
  const values = exportFilterValues(rawFilters)
  if (!values.ok) return values
  const parsed = parseFilterInput(values.value, exportFilterFields, 'filters.')
  if (!parsed.ok) return parsed
  if (principal.workspaceId !== null) {
    if (workspaceId !== undefined) {
      const named = await deps.store.findWorkspace(principal.organisationId, workspaceId)
      if (named?.id !== principal.workspaceId) return { ok: false, error: notFound('workspace') }
    }
    return { ok: true, value: { filters: values.value, workspaceId: principal.workspaceId } }
  }
  let target = workspaceId
  const slug = values.value.workspace_slug
  if (target !== undefined && slug !== undefined) {
    const [byId, bySlug] = await Promise.all([deps.store.findWorkspace(principal.organisationId, target), deps.store.findWorkspace(principal.organisationId, slug)])
    if (byId === null || byId.id !== bySlug?.id) return { ok: false, error: invalid('filters.workspace_slug: names another workspace than workspace_id', 'filters.workspace_slug') }
  }
  target ??= slug
  if (target === undefined) return { ok: true, value: { filters: values.value, workspaceId: null } }
  const scope = await logScopeOf(deps, principal, target)
  if (!scope.ok) return { ok: false, error: notFound('workspace') }
  return { ok: true, value: { filters: values.value, workspaceId: scope.value.workspaceId } }
}

async function createExport({ ctx, principal, deps }: AdminRequest): Promise<Reply | GatewayError> {
  const ports = logServicesOf(deps)
  if (!ports.ok) return ports.error
  const body = parseBody(ctx, createExportBody)
  if (!body.ok) return body.error
  const target = await exportTarget(deps, principal, body.value.workspace_id, body.value.filters)
  if (!target.ok) return target.error
  const now = nowIso(deps)
  const record: ExportRecord = {
    id: randomUUID(),
    organisationId: principal.organisationId,
    workspaceId: target.value.workspaceId,
    filters: target.value.filters,
    requestedData: body.value.requested_data,
    description: body.value.description ?? null,
    status: 'draft',
    total: 0,
    error: null,
    createdBy: principal.keyId,
    createdAt: now,
    lastUpdatedAt: now,
    signingKey: newSigningKey(),
  }
  await ports.value.exports.insert(record)
  noteAction(ctx, { workspaceId: record.workspaceId, resourceId: record.id })
  return jsonReply(200, { id: record.id, total: record.total, object: 'export' })
}

async function listExports({ ctx, principal, deps }: AdminRequest): Promise<Reply | GatewayError> {
  const ports = logServicesOf(deps)
  if (!ports.ok) return ports.error
  const query = parseQuery(ctx, listExportsQuery)
  if (!query.ok) return query.error
  let workspaceId = principal.workspaceId ?? undefined
  if (principal.workspaceId === null && query.value.workspace_id !== undefined) {
    const workspace = await deps.store.findWorkspace(principal.organisationId, query.value.workspace_id)
    if (workspace === null) return notFound('workspace')
    workspaceId = workspace.id
  }
  const page = await ports.value.exports.list(principal.organisationId, workspaceId === undefined ? {} : { workspaceId }, pageOf(query.value.current_page, query.value.page_size))
  const data = await Promise.all(page.items.map((record) => exportView(deps, record)))
  return jsonReply(200, listView(page.total, data))
}

async function getExport(request: AdminRequest): Promise<Reply | GatewayError> {
  const ports = logServicesOf(request.deps)
  if (!ports.ok) return ports.error
  const record = await pathExport(request, ports.value.exports, undefined)
  if (record instanceof GatewayError) return record
  return jsonReply(200, await exportView(request.deps, record))
}

async function updateExport({ ctx, principal, deps }: AdminRequest): Promise<Reply | GatewayError> {
  const ports = logServicesOf(deps)
  if (!ports.ok) return ports.error
  const body = parseBody(ctx, updateExportBody)
  if (!body.ok) return body.error
  const record = await visibleExport(ports.value.exports, principal, ctx.params.exportId)
  if (record === null) return notFound('export')
  if (record.status === 'in_progress') return conflict('The export is running: cancel it before changing it')
  const input = body.value
  let workspaceId = record.workspaceId
  let storedFilters = record.filters
  if (input.filters !== undefined || input.workspace_id !== undefined) {
    // Without a new workspace_id or filters.workspace_slug an organisation key's export keeps its workspace.
    const keeps = principal.workspaceId === null && record.workspaceId !== null && input.filters?.workspace_slug === undefined
    const named = input.workspace_id ?? (keeps ? (record.workspaceId ?? undefined) : undefined)
    const target = await exportTarget(deps, principal, named, input.filters ?? record.filters)
    if (!target.ok) return target.error
    workspaceId = target.value.workspaceId
    storedFilters = target.value.filters
  }
  const updated: ExportRecord = {
    ...record,
    workspaceId,
    filters: storedFilters,
    requestedData: input.requested_data ?? record.requestedData,
    description: input.description === undefined ? record.description : input.description,
    status: 'draft',
    total: 0,
    error: null,
    lastUpdatedAt: nowIso(deps, record.lastUpdatedAt),
  }
  if (!(await ports.value.exports.update(updated, record.lastUpdatedAt))) return gatewayError(ERRORS.GW_ADMIN_STALE)
  return jsonReply(200, { id: updated.id, total: updated.total, object: 'export' })
}

function startExport(jobs: ExportJobs): Handler {
  return async (request: AdminRequest): Promise<Reply | GatewayError> => {
    const { ctx, deps } = request
    const ports = logServicesOf(deps)
    if (!ports.ok) return ports.error
    const body = parseBody(ctx, workspaceIdBody)
    if (!body.ok) return body.error
    const record = await pathExport(request, ports.value.exports, body.value.workspace_id)
    if (record instanceof GatewayError) return record
    if (record.status === 'in_progress') return conflict('The export is already running')
    if (jobs.running >= deps.config.maxRunningExports) return conflict('Too many exports are running on this instance: retry when one has ended')
    const started: ExportRecord = { ...record, status: 'in_progress', total: 0, error: null, signingKey: newSigningKey(), lastUpdatedAt: nowIso(deps, record.lastUpdatedAt) }
    if (!(await ports.value.exports.update(started, record.lastUpdatedAt))) return gatewayError(ERRORS.GW_ADMIN_STALE)
    jobs.run(started, ports.value.analytics, ports.value.exports)
    return jsonReply(200, { message: 'export started', object: 'export' })
  }
}

function cancelExport(jobs: ExportJobs): Handler {
  return async (request: AdminRequest): Promise<Reply | GatewayError> => {
    const { ctx, deps } = request
    const ports = logServicesOf(deps)
    if (!ports.ok) return ports.error
    const body = parseBody(ctx, workspaceIdBody)
    if (!body.ok) return body.error
    const record = await pathExport(request, ports.value.exports, body.value.workspace_id)
    if (record instanceof GatewayError) return record
    if (record.status !== 'in_progress') return conflict(`The export is not running (status ${record.status})`)
    const stopped: ExportRecord = { ...record, status: 'stopped', lastUpdatedAt: nowIso(deps, record.lastUpdatedAt) }
    if (!(await ports.value.exports.update(stopped, record.lastUpdatedAt))) return gatewayError(ERRORS.GW_ADMIN_STALE)
    jobs.stop(record.id)
    return jsonReply(200, { message: 'export cancelled', object: 'export' })
  }
}

async function downloadExport(request: AdminRequest): Promise<Reply | GatewayError> {
  const deps = request.deps
  const ports = logServicesOf(deps)
  if (!ports.ok) return ports.error
  const record = await pathExport(request, ports.value.exports, undefined)
  if (record instanceof GatewayError) return record
  if (record.status !== 'success') return conflict(`The export has no file (status ${record.status}): start it and wait for status success`)
  const path = signedPath(record, deps.clock.now() + deps.config.exportLinkTtlMs)
  return jsonReply(200, { signed_url: `${deps.config.publicUrl}${path}` })
}

const FILE_NOT_FOUND = 'Export file not found, or the link has expired'

async function exportFile({ ctx, deps }: PublicRequest): Promise<Reply | GatewayError> {
  const logs = logServicesOf(deps)
  if (!logs.ok) return logs.error
  const store = logs.value.exports
  const query = parseQuery(ctx, exportFileQuery)
  const id = ctx.params.exportId
  if (!query.ok || id === undefined || !UUID.test(id)) return gatewayError(ERRORS.GW_ADMIN_NOT_FOUND, FILE_NOT_FOUND)
  if (Number(query.value.expires) * 1000 < deps.clock.now()) return gatewayError(ERRORS.GW_ADMIN_NOT_FOUND, FILE_NOT_FOUND)
  const record = await store.find(null, id)
  if (record === null || record.status !== 'success') return gatewayError(ERRORS.GW_ADMIN_NOT_FOUND, FILE_NOT_FOUND)
  const given = Buffer.from(query.value.signature, 'base64url')
  const expected = signatureOf(record, query.value.expires)
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return gatewayError(ERRORS.GW_ADMIN_NOT_FOUND, FILE_NOT_FOUND)
  const source = await store.openReader(record.id)
  if (source === null) return gatewayError(ERRORS.GW_ADMIN_NOT_FOUND, FILE_NOT_FOUND)
  return {
    status: 200,
    headers: [
      ['content-type', 'application/x-ndjson'],
      ['content-disposition', `attachment; filename="export-${record.id}.jsonl"`],
      ['cache-control', 'no-store'],
    ],
    body: { source, sse: false, toError: () => gatewayError(ERRORS.GW_INTERNAL) },
  }
}

export function exportHandlers(jobs: ExportJobs): HandlerMap {
  return {
    'logs.exports.create': createExport,
    'logs.exports.list': listExports,
    'logs.exports.get': getExport,
    'logs.exports.update': updateExport,
    'logs.exports.start': startExport(jobs),
    'logs.exports.cancel': cancelExport(jobs),
    'logs.exports.download': downloadExport,
  }
}

export const publicExportHandlers: PublicHandlerMap = {
  'logs.exports.file': exportFile,
}
