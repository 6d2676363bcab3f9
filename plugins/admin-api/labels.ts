/**
 * Labels (`/v1/labels…`, API.md §5, reference/admin-api.md §13.3): names put on prompt versions, so
 * a client can run `<prompt>@<label>`. Every organisation has the built-in labels `production`,
 * `staging` and `development` (`is_universal`, in no workspace), made on first use
 * (`ensureBuiltInLabels` before labels are listed, created or resolved); custom labels belong to a
 * workspace.
 *
 * Rules on top of the route's scope check (`prompts.*`; labels have no scopes of their own):
 * - names follow the reference's rule: not `latest`, `default` or all digits, no `@` or white space
 *   (`LABEL_NAME`), and, ours, no control characters; unique in the workspace, and no custom label
 *   takes a built-in name (409);
 * - built-in labels are seen by everyone and cannot be changed or deleted (403 AB03);
 * - workspaces as for virtual keys: an Admin API key names `workspace_id` on create; a workspace key
 *   or JWT is locked to its workspace; another workspace's label is 404; creating, changing and
 *   deleting need a workspace admin or manager (members are read-only);
 * - `organisation_id`, which the reference accepts, must be the caller's organisation (else 404);
 * - deleting a label takes it off every version that carried it (a call by that label then
 *   answers 404). Every change is audited in the same transaction and published on the `prompts`
 *   channel.
 */
import { randomUUID } from 'node:crypto'
import { z } from 'zod'
import type { LabelRecord, WorkspaceRecord } from '../../core/admin-records.js'
import type { Principal } from '../../core/context.js'
import { GatewayError } from '../../core/errors.js'
import { jsonReply, type Reply } from '../../core/plugin.js'
import type { AdminStore } from '../../core/ports.js'
import { canManage, listScope, resourceWorkspace, targetWorkspace, visibleWorkspace } from './access.js'
import { publishPromptChange } from './prompt-templates.js'
import {
  commit,
  forbidden,
  invalid,
  noteAction,
  notFound,
  nowIso,
  pageOf,
  parseBody,
  parseQuery,
  requireApplied,
  type AdminDeps,
  type AdminRequest,
  type HandlerMap,
} from './request.js'
import { snakePaging, workspaceIdField } from './schemas.js'
import { listView } from './views.js'

// ---------------------------------------------------------------------------------------------
// Schemas (also used by the OpenAPI document)

/** The reference's rule: not `latest`, `default` or all digits; no `@` or white space. */
export const LABEL_NAME = /^(?!latest$)(?!default$)(?!\d+$)[a-zA-Z0-9_-]*[^@\s]?[a-zA-Z0-9_-]*$/
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f]/

const labelName = z
  .string()
  .min(1)
  .max(100)
  .regex(LABEL_NAME, 'must not be latest, default or all digits, and must not contain @ or white space')
  .refine((name) => !CONTROL_CHARACTER.test(name), 'must not contain control characters')
const labelDescription = z.string().max(2000).nullable()
const colorCode = z
  .string()
  .regex(/^#?[0-9A-Fa-f]{3,8}$/, 'must be a hex colour such as #3b82f6')
  .nullable()
const organisationId = z.string().min(1).max(200).describe("The caller's organisation (optional; any other is not found)")

export const createLabelBody = z
  .object({
    organisation_id: organisationId.optional(),
    workspace_id: workspaceIdField.optional(),
    name: labelName,
    description: labelDescription.optional(),
    color_code: colorCode.optional(),
  })
  .strict()

export const updateLabelBody = z
  .object({
    organisation_id: organisationId.optional(),
    workspace_id: workspaceIdField.optional(),
    name: labelName.optional(),
    description: labelDescription.optional(),
    color_code: colorCode.optional(),
  })
  .strict()

export const deleteLabelBody = z.object({ organisation_id: organisationId.optional(), workspace_id: workspaceIdField.optional() }).strict()

export const labelQuery = z.object({ organisation_id: organisationId.optional(), workspace_id: workspaceIdField.optional() })

export const listLabelsQuery = z.object({
  ...snakePaging,
  organisation_id: organisationId.optional(),
  workspace_id: workspaceIdField.optional(),
  search: z.string().max(200).optional().describe('Case-insensitive part of the name'),
})

// ---------------------------------------------------------------------------------------------
// Helpers (also used by prompts)

/** Organisations whose built-in labels exist, per store: built-ins are never deleted, so once is enough. */
const ensuredLabels = new WeakMap<AdminStore, Set<string>>()

/** Makes the organisation's built-in labels if they are missing (once per organisation and store on this instance). */
export async function ensureBuiltInLabels(deps: AdminDeps, organisationId: string): Promise<void> {
  let ensured = ensuredLabels.get(deps.store)
  if (ensured === undefined) {
    ensured = new Set()
    ensuredLabels.set(deps.store, ensured)
  }
  if (ensured.has(organisationId)) return
  await deps.store.ensureBuiltInLabels(organisationId, nowIso(deps))
  ensured.add(organisationId)
}

/**
 * The label `idOrName` names (its UUID, or its name) if a prompt of `workspaceId` can carry it: a
 * built-in one or the workspace's own. `null` otherwise (reported as not found, so another
 * workspace's label is never revealed).
 */
export async function usableLabel(deps: AdminDeps, principal: Principal, idOrName: string, workspaceId: string): Promise<LabelRecord | null> {
  await ensureBuiltInLabels(deps, principal.organisationId)
  const label = (await deps.store.findLabel(principal.organisationId, idOrName)) ?? (await deps.store.findLabelByName(principal.organisationId, workspaceId, idOrName))
  if (label === null) return null
  return label.isUniversal || label.workspaceId === workspaceId ? label : null
}

/** `organisation_id`, when sent, must be the caller's organisation: any other is reported as not found. */
function otherOrganisation(principal: Principal, named: string | undefined): GatewayError | null {
  return named === undefined || named === principal.organisationId ? null : notFound('Organisation')
}

export function labelView(label: LabelRecord, workspaceSlug: string | null): Record<string, unknown> {
  return {
    object: 'label',
    id: label.id,
    name: label.name,
    description: label.description,
    color_code: label.colorCode,
    organisation_id: label.organisationId,
    workspace_id: workspaceSlug,
    is_universal: label.isUniversal,
    status: label.status,
    created_at: label.createdAt,
    last_updated_at: label.lastUpdatedAt,
  }
}

interface Found {
  readonly label: LabelRecord
  /** `null` for a built-in label. */
  readonly workspace: WorkspaceRecord | null
}

/**
 * The label of the path if the caller may see it (404 otherwise): built-in labels are seen from
 * every workspace (a `workspace_id` given must still be one the caller sees); custom ones as any
 * workspace resource (`resourceWorkspace`).
 */
async function visibleLabel(request: AdminRequest, named: { organisation_id?: string | undefined; workspace_id?: string | undefined }): Promise<Found | GatewayError> {
  const { deps, principal, ctx } = request
  const query = parseQuery(ctx, labelQuery)
  if (!query.ok) return query.error
  const foreign = otherOrganisation(principal, named.organisation_id) ?? otherOrganisation(principal, query.value.organisation_id)
  if (foreign !== null) return foreign
  const label = await deps.store.findLabel(principal.organisationId, ctx.params.labelId ?? '')
  if (label === null) return notFound('Label')
  if (label.workspaceId === null) {
    for (const idOrSlug of [named.workspace_id, query.value.workspace_id]) {
      if (idOrSlug !== undefined && (await visibleWorkspace(deps, principal, idOrSlug)) === null) return notFound('Label')
    }
    noteAction(ctx, { resourceId: label.id })
    return { label, workspace: null }
  }
  const workspace = await resourceWorkspace(request, { id: label.id, workspaceId: label.workspaceId }, named.workspace_id, 'Label')
  return workspace instanceof GatewayError ? workspace : { label, workspace }
}

/** The label of the path if the caller may also change it: never a built-in one, and only by admins and managers. */
async function changeableLabel(
  request: AdminRequest,
  named: { organisation_id?: string | undefined; workspace_id?: string | undefined },
): Promise<{ label: LabelRecord; workspace: WorkspaceRecord } | GatewayError> {
  const found = await visibleLabel(request, named)
  if (found instanceof GatewayError) return found
  if (found.workspace === null) return forbidden('Built-in labels (production, staging, development) cannot be changed or deleted')
  if (!(await canManage(request.deps, request.principal, found.workspace))) return forbidden('Only workspace admins and managers can change labels')
  return { label: found.label, workspace: found.workspace }
}

// ---------------------------------------------------------------------------------------------
// Handlers

async function createLabel(request: AdminRequest): Promise<Reply | GatewayError> {
  const body = parseBody(request.ctx, createLabelBody)
  if (!body.ok) return body.error
  const { deps, principal, ctx } = request
  const input = body.value
  const foreign = otherOrganisation(principal, input.organisation_id)
  if (foreign !== null) return foreign
  const target = await targetWorkspace(deps, principal, input.workspace_id)
  if (!target.ok) return target.missing ? invalid('workspace_id: required with an Admin API key', 'workspace_id') : notFound('Workspace')
  const workspace = target.workspace
  noteAction(ctx, { workspaceId: workspace.id })
  if (!(await canManage(deps, principal, workspace))) return forbidden('Only workspace admins and managers can create labels')
  await ensureBuiltInLabels(deps, principal.organisationId)
  const now = nowIso(deps)
  const label: LabelRecord = {
    id: randomUUID(),
    organisationId: principal.organisationId,
    workspaceId: workspace.id,
    name: input.name,
    description: input.description ?? null,
    colorCode: input.color_code ?? null,
    isUniversal: false,
    status: 'active',
    createdAt: now,
    lastUpdatedAt: now,
  }
  noteAction(ctx, { resourceId: label.id })
  await commit(request, 200, (writer) => writer.insertLabel(label))
  publishPromptChange(deps, workspace.id)
  return jsonReply(200, { id: label.id, object: 'label' })
}

async function listLabels(request: AdminRequest): Promise<Reply | GatewayError> {
  const query = parseQuery(request.ctx, listLabelsQuery)
  if (!query.ok) return query.error
  const { deps, principal } = request
  const { current_page, page_size, workspace_id, organisation_id, search } = query.value
  const foreign = otherOrganisation(principal, organisation_id)
  if (foreign !== null) return foreign
  const scope = await listScope(request, workspace_id)
  if (scope instanceof GatewayError) return scope
  const { workspaceId, slugs } = scope
  await ensureBuiltInLabels(deps, principal.organisationId)
  const filter = { ...(workspaceId === undefined ? {} : { workspaceId }), ...(search === undefined ? {} : { search }) }
  const page = await deps.store.listLabels(principal.organisationId, filter, pageOf(current_page, page_size))
  const data = []
  for (const label of page.items) {
    let slug: string | null = null
    if (label.workspaceId !== null) {
      slug = slugs.get(label.workspaceId) ?? null
      if (slug === null) {
        slug = (await deps.store.findWorkspace(principal.organisationId, label.workspaceId))?.slug ?? label.workspaceId
        slugs.set(label.workspaceId, slug)
      }
    }
    data.push(labelView(label, slug))
  }
  return jsonReply(200, listView(page.total, data))
}

async function getLabel(request: AdminRequest): Promise<Reply | GatewayError> {
  const found = await visibleLabel(request, {})
  if (found instanceof GatewayError) return found
  return jsonReply(200, labelView(found.label, found.workspace?.slug ?? null))
}

async function updateLabel(request: AdminRequest): Promise<Reply | GatewayError> {
  const body = parseBody(request.ctx, updateLabelBody)
  if (!body.ok) return body.error
  const found = await changeableLabel(request, body.value)
  if (found instanceof GatewayError) return found
  const { deps } = request
  const { label, workspace } = found
  const input = body.value
  const updated: LabelRecord = {
    ...label,
    name: input.name ?? label.name,
    description: input.description === undefined ? label.description : input.description,
    colorCode: input.color_code === undefined ? label.colorCode : input.color_code,
    lastUpdatedAt: nowIso(deps, label.lastUpdatedAt),
  }
  await commit(request, 200, (writer) => writer.updateLabel(updated, label.lastUpdatedAt).then(requireApplied))
  publishPromptChange(deps, workspace.id)
  return jsonReply(200, labelView(updated, workspace.slug))
}

async function deleteLabel(request: AdminRequest): Promise<Reply | GatewayError> {
  const body = parseBody(request.ctx, deleteLabelBody)
  if (!body.ok) return body.error
  const found = await changeableLabel(request, body.value)
  if (found instanceof GatewayError) return found
  const { deps, principal } = request
  await commit(request, 200, (writer) => writer.deleteLabel(principal.organisationId, found.label.id).then(requireApplied))
  publishPromptChange(deps, found.workspace.id)
  return jsonReply(200, {})
}

export const labelHandlers: HandlerMap = {
  'labels.create': createLabel,
  'labels.list': listLabels,
  'labels.get': getLabel,
  'labels.update': updateLabel,
  'labels.delete': deleteLabel,
}
