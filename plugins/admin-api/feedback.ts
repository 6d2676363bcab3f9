/**
 * Feedback (`POST /v1/feedback`, `PUT /v1/feedback/{id}`, reference §11; scope `logs.write` or
 * `feedbacks.write`): a score (−10..10, weight 0..1) on a request, named by its trace id.
 *
 * Rules: the trace must be one of the caller's scope (its workspace; another workspace's trace is
 * reported as not found, never revealed); a batch (array, at most 100) is checked whole before any
 * of it is stored. Request logs are written in batches, so a trace that is not found yet makes the
 * sink flush once and is looked up again: feedback sent right after its request is accepted.
 * An update writes a new version of the entry (same id, later `updatedAt`); its optional
 * `workspace_id` must name the entry's workspace, else 404 (access.ts `checkNamedWorkspace`).
 */
import { randomUUID } from 'node:crypto'
import { z } from 'zod'
import type { Principal } from '../../core/context.js'
import type { GatewayError } from '../../core/errors.js'
import type { LogServices } from '../../core/log-exports.js'
import type { FeedbackRecord, LogScope } from '../../core/logs.js'
import { jsonReply, type Reply } from '../../core/plugin.js'
import { checkNamedWorkspace } from './access.js'
import { logServicesOf } from './analytics.js'
import { METADATA_KEY, TRACE_ID, UUID } from './log-filters.js'
import { notFound, parseBody, parseOneOrMany, type AdminRequest, type HandlerMap } from './request.js'
import { workspaceIdField } from './schemas.js'

/** Entries of one `POST /v1/feedback`. */
export const MAX_FEEDBACK_BATCH = 100

const traceId = z.string().regex(TRACE_ID, 'must be a trace id: 1-128 visible ASCII characters without commas')
const value = z.number().int('must be a whole number').min(-10).max(10)
const weight = z.number().min(0).max(1)
const feedbackMetadata = z
  .record(z.string().regex(METADATA_KEY, 'keys are letters, digits and _ . : @ / - (at most 128)'), z.string().max(1024))
  .refine((metadata) => Object.keys(metadata).length <= 50, 'at most 50 pairs')

export const feedbackItem = z
  .object({
    trace_id: traceId.describe('The x-gateway-trace-id of the request rated'),
    value: value.describe('Integer score, -10..10'),
    weight: weight.default(1).describe('0..1 (default 1); weighted feedback = value × weight'),
    metadata: feedbackMetadata.nullable().optional(),
  })
  .strict()

export const feedbackBatch = z.array(feedbackItem).min(1).max(MAX_FEEDBACK_BATCH)
/** For the OpenAPI document; the handler validates each shape on its own (`parseOneOrMany`). */
export const createFeedbackBody = z.union([feedbackItem, feedbackBatch])

export const updateFeedbackBody = z
  .object({
    workspace_id: workspaceIdField.optional(),
    value,
    weight: weight.optional().describe('0..1; absent keeps the current weight'),
    metadata: feedbackMetadata.nullable().optional().describe('Replaces the metadata; absent keeps it'),
  })
  .strict()

/** Feedback and log reads cover the caller's workspace (organisation keys: the organisation). */
export function callerScope(principal: Principal): LogScope {
  return { organisationId: principal.organisationId, workspaceId: principal.workspaceId }
}

/**
 * Whether every trace id is a request of `scope`; the index of the first unknown one otherwise.
 * Misses cost one sink flush (records written since the last one become visible), then a re-check.
 */
async function firstUnknownTrace(ports: LogServices, scope: LogScope, traceIds: readonly string[]): Promise<number> {
  const known = new Map<string, boolean>()
  let flushed = false
  for (let index = 0; index < traceIds.length; index++) {
    const id = traceIds[index] as string
    let found = known.get(id)
    if (found === undefined) {
      found = await ports.analytics.hasTrace(scope, id)
      if (!found && !flushed) {
        flushed = true
        await ports.sink.flush()
        found = await ports.analytics.hasTrace(scope, id)
      }
      known.set(id, found)
    }
    if (!found) return index
  }
  return -1
}

async function createFeedback({ ctx, principal, deps }: AdminRequest): Promise<Reply | GatewayError> {
  const ports = logServicesOf(deps)
  if (!ports.ok) return ports.error
  const body = parseOneOrMany(ctx, feedbackItem, feedbackBatch)
  if (!body.ok) return body.error
  const batch = Array.isArray(body.value)
  const items = batch ? body.value : [body.value]
  const scope = callerScope(principal)
  const unknown = await firstUnknownTrace(ports.value, scope, items.map((item) => item.trace_id))
  if (unknown >= 0) return notFound(`${batch ? `${unknown}.` : ''}trace_id: request ${items[unknown]?.trace_id ?? ''}`)
  const now = deps.clock.now()
  const records: FeedbackRecord[] = items.map((item) => ({
    id: randomUUID(),
    traceId: item.trace_id,
    organisationId: principal.organisationId,
    workspaceId: principal.workspaceId,
    value: item.value,
    weight: item.weight,
    metadata: item.metadata ?? null,
    createdAt: now,
    updatedAt: now,
  }))
  await ports.value.sink.recordFeedback(records)
  return jsonReply(200, { status: 'success', message: records.length === 1 ? 'feedback saved' : `${records.length} feedbacks saved`, feedback_ids: records.map((record) => record.id) })
}

async function updateFeedback(request: AdminRequest): Promise<Reply | GatewayError> {
  const { ctx, principal, deps } = request
  const ports = logServicesOf(deps)
  if (!ports.ok) return ports.error
  const body = parseBody(ctx, updateFeedbackBody)
  if (!body.ok) return body.error
  const id = ctx.params.feedbackId ?? ''
  if (!UUID.test(id)) return notFound('feedback')
  const existing = await ports.value.analytics.findFeedback(callerScope(principal), id.toLowerCase())
  if (existing === null) return notFound('feedback')
  const input = body.value
  const misnamed = await checkNamedWorkspace(request, input.workspace_id, existing.workspaceId, 'feedback')
  if (misnamed !== null) return misnamed
  const updated: FeedbackRecord = {
    ...existing,
    value: input.value,
    weight: input.weight ?? existing.weight,
    metadata: input.metadata === undefined ? existing.metadata : input.metadata,
    // A later version replaces the earlier one, so it must be strictly later.
    updatedAt: Math.max(deps.clock.now(), existing.updatedAt + 1),
  }
  await ports.value.sink.recordFeedback([updated])
  return jsonReply(200, { status: 'success', message: 'feedback updated', feedback_ids: [updated.id] })
}

export const feedbackHandlers: HandlerMap = {
  'feedback.create': createFeedback,
  'feedback.update': updateFeedback,
}
