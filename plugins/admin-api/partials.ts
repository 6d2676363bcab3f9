/**
 * Prompt partials (`/v1/prompts/partials…`, API.md §5, reference/admin-api.md §13.3): template
 * pieces that prompts of the same workspace include as `{{>name}}`, versioned and published like
 * prompts (a prompt renders a partial's published version).
 *
 * - Create: `name` (letters, digits, `_`, `.`, `-`: what `{{>name}}` calls it; unique in the
 *   workspace), `string` (plain text that Mustache parses, at most 1 MiB), optional
 *   `version_description` and `collection_id` (a collection of the workspace). Version 1 is made
 *   and published.
 * - Update: a new `string` makes a new version (latest + 1, not published) with its
 *   `version_description` (or `description`, the reference's name); `name` and `status` change
 *   the partial itself. `PUT …/makeDefault {version}` publishes a version (`prompts.publish`).
 * - Lists (`GET /v1/prompts/partials`, `…/versions`) are bare arrays, as the reference answers.
 * - Workspaces as for virtual keys (another workspace's partial is 404; members are read-only).
 *   Every change is audited in the same transaction and published on the `prompts` channel, so
 *   prompts using the partial are rendered anew on every instance.
 */
import { randomUUID } from 'node:crypto'
import { z } from 'zod'
import type { PartialRecord, PartialVersionRecord, WorkspaceRecord } from '../../core/admin-records.js'
import { GatewayError } from '../../core/errors.js'
import { jsonReply, type Reply } from '../../core/plugin.js'
import { canManage, listScope, pathResourceWorkspace, targetWorkspace } from './access.js'
import { collectionInWorkspace, collectionRef, CREATE_ATTEMPTS, retryableConflict } from './collections.js'
import { checkPartialTemplate, newSlug, publishPromptChange } from './prompt-templates.js'
import { templateText } from './prompts.js'
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
  type AdminRequest,
  type HandlerMap,
} from './request.js'
import { snakePaging, workspaceIdBody, workspaceIdField, workspaceIdQuery } from './schemas.js'

// ---------------------------------------------------------------------------------------------
// Schemas (also used by the OpenAPI document)

/** What a template calls the partial by: `{{>name}}`. No white space, braces or `@`, so it reads the same in every tag. */
export const PARTIAL_NAME = /^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,99}$/

const partialName = z.string().regex(PARTIAL_NAME, 'must be 1-100 letters, digits, _, . or - (what templates call it: {{>name}})')
const partialText = templateText.describe('The partial: plain text with Mustache variables and sections, at most 1 MiB')
const versionDescription = z.string().max(2000).nullable()

export const createPartialBody = z
  .object({
    workspace_id: workspaceIdField.optional(),
    name: partialName,
    string: partialText,
    version_description: versionDescription.optional(),
    collection_id: collectionRef.nullable().optional(),
  })
  .strict()

export const updatePartialBody = z
  .object({
    workspace_id: workspaceIdField.optional(),
    name: partialName.optional(),
    string: partialText.optional(),
    version_description: versionDescription.optional(),
    description: versionDescription.optional().describe('The new version’s description (the reference’s name for version_description)'),
    status: z.enum(['active', 'archived']).optional(),
  })
  .strict()

export const listPartialsQuery = z.object({
  ...snakePaging,
  workspace_id: workspaceIdField.optional(),
  collection_id: collectionRef.optional(),
})

export const publishPartialBody = z
  .object({
    workspace_id: workspaceIdField.optional(),
    version: z.number().int().min(1).describe('The version number to publish'),
  })
  .strict()

export const partialWorkspaceQuery = workspaceIdQuery
export const deletePartialBody = workspaceIdBody

// ---------------------------------------------------------------------------------------------
// Views

function partialListItem(partial: PartialRecord, workspaceSlug: string): Record<string, unknown> {
  return {
    object: 'partial',
    id: partial.id,
    slug: partial.slug,
    name: partial.name,
    collection_id: partial.collectionId,
    workspace_id: workspaceSlug,
    published_version: partial.publishedVersion,
    latest_version: partial.latestVersion,
    status: partial.status,
    created_at: partial.createdAt,
    last_updated_at: partial.lastUpdatedAt,
  }
}

function partialView(partial: PartialRecord, version: PartialVersionRecord, workspaceSlug: string): Record<string, unknown> {
  return {
    ...partialListItem(partial, workspaceSlug),
    string: version.template,
    version: version.version,
    version_description: version.description,
    prompt_partial_version_id: version.id,
  }
}

function partialVersionItem(partial: PartialRecord, version: PartialVersionRecord): Record<string, unknown> {
  return {
    object: 'partial',
    prompt_partial_id: partial.id,
    prompt_partial_version_id: version.id,
    slug: partial.slug,
    version: version.version,
    string: version.template,
    description: version.description,
    created_at: version.createdAt,
    prompt_version_status: version.status,
  }
}

// ---------------------------------------------------------------------------------------------
// Helpers

interface Found {
  readonly partial: PartialRecord
  readonly workspace: WorkspaceRecord
}

/** The partial of the path (UUID or slug) if the caller may see it, and with `change` also change it (see `pathResourceWorkspace`). */
async function visiblePartial(request: AdminRequest, namedInBody: string | undefined, change = false): Promise<Found | GatewayError> {
  const partial = await request.deps.store.findPartial(request.principal.organisationId, request.ctx.params.partialId ?? '')
  const workspace = await pathResourceWorkspace(request, partial, namedInBody, 'Partial', change ? 'partials' : null)
  return workspace instanceof GatewayError ? workspace : { partial: partial!, workspace }
}

/** The partial of the path if the caller may also change it (403 for read-only members). */
function changeablePartial(request: AdminRequest, namedInBody: string | undefined): Promise<Found | GatewayError> {
  return visiblePartial(request, namedInBody, true)
}

// ---------------------------------------------------------------------------------------------
// Handlers

async function createPartial(request: AdminRequest): Promise<Reply | GatewayError> {
  const body = parseBody(request.ctx, createPartialBody)
  if (!body.ok) return body.error
  const { deps, principal, ctx } = request
  const input = body.value
  const target = await targetWorkspace(deps, principal, input.workspace_id)
  if (!target.ok) return target.missing ? invalid('workspace_id: required with an Admin API key', 'workspace_id') : notFound('Workspace')
  const workspace = target.workspace
  noteAction(ctx, { workspaceId: workspace.id })
  if (!(await canManage(deps, principal, workspace))) return forbidden('Only workspace admins and managers can create partials')
  let collectionId: string | null = null
  if (input.collection_id != null) {
    const collection = await collectionInWorkspace(deps, principal, input.collection_id, workspace.id)
    if (collection === null) return notFound('Collection')
    collectionId = collection.id
  }
  const check = checkPartialTemplate(input.string)
  if (!check.ok) return invalid(check.message, 'string')

  const now = nowIso(deps)
  let partial: PartialRecord = {
    id: randomUUID(),
    slug: newSlug(input.name, 'partial'),
    organisationId: principal.organisationId,
    workspaceId: workspace.id,
    collectionId,
    name: input.name,
    status: 'active',
    publishedVersion: 1,
    latestVersion: 1,
    createdAt: now,
    lastUpdatedAt: now,
  }
  const first: PartialVersionRecord = {
    id: randomUUID(),
    partialId: partial.id,
    organisationId: principal.organisationId,
    workspaceId: workspace.id,
    version: 1,
    template: input.string,
    description: input.version_description ?? null,
    status: 'active',
    createdAt: now,
  }
  noteAction(ctx, { resourceId: partial.id })
  for (let attempt = 1; ; attempt++) {
    try {
      await commit(request, 200, (writer) => writer.insertPartial(partial, first))
      break
    } catch (error) {
      if (!retryableConflict(error) || attempt >= CREATE_ATTEMPTS) throw error
      partial = { ...partial, slug: newSlug(input.name, 'partial') }
    }
  }
  publishPromptChange(deps, workspace.id)
  return jsonReply(200, { id: partial.id, slug: partial.slug, version_id: first.id, object: 'partial' })
}

/** A bare array, as the reference answers (paged with `current_page`/`page_size`). */
async function listPartials(request: AdminRequest): Promise<Reply | GatewayError> {
  const query = parseQuery(request.ctx, listPartialsQuery)
  if (!query.ok) return query.error
  const { deps, principal } = request
  const { current_page, page_size, workspace_id, collection_id } = query.value
  const scope = await listScope(request, workspace_id)
  if (scope instanceof GatewayError) return scope
  const { workspaceId, slugs } = scope
  let collectionId: string | undefined
  if (collection_id !== undefined) {
    const collection = await deps.store.findCollection(principal.organisationId, collection_id)
    if (collection === null || (workspaceId !== undefined && collection.workspaceId !== workspaceId)) return notFound('Collection')
    collectionId = collection.id
  }
  const filter = { ...(workspaceId === undefined ? {} : { workspaceId }), ...(collectionId === undefined ? {} : { collectionId }) }
  const page = await deps.store.listPartials(principal.organisationId, filter, pageOf(current_page, page_size))
  const data = []
  for (const partial of page.items) {
    let slug = slugs.get(partial.workspaceId)
    if (slug === undefined) {
      slug = (await deps.store.findWorkspace(principal.organisationId, partial.workspaceId))?.slug ?? partial.workspaceId
      slugs.set(partial.workspaceId, slug)
    }
    data.push(partialListItem(partial, slug))
  }
  return jsonReply(200, data)
}

/** The partial with its published version (the one prompts render). */
async function getPartial(request: AdminRequest): Promise<Reply | GatewayError> {
  const found = await visiblePartial(request, undefined)
  if (found instanceof GatewayError) return found
  const version = await request.deps.store.findPartialVersion(found.partial.id, { kind: 'published' })
  if (version === null) return notFound('Partial version')
  return jsonReply(200, partialView(found.partial, version, found.workspace.slug))
}

async function updatePartial(request: AdminRequest): Promise<Reply | GatewayError> {
  const body = parseBody(request.ctx, updatePartialBody)
  if (!body.ok) return body.error
  const input = body.value
  const found = await changeablePartial(request, input.workspace_id)
  if (found instanceof GatewayError) return found
  const { deps } = request
  const { partial, workspace } = found
  if (input.version_description !== undefined && input.description !== undefined) return invalid('description: send description or version_description, not both', 'description')
  const description = input.version_description ?? input.description
  let version: PartialVersionRecord | null = null
  if (input.string !== undefined) {
    const check = checkPartialTemplate(input.string)
    if (!check.ok) return invalid(check.message, 'string')
    version = {
      id: randomUUID(),
      partialId: partial.id,
      organisationId: partial.organisationId,
      workspaceId: partial.workspaceId,
      version: partial.latestVersion + 1,
      template: input.string,
      description: description ?? null,
      status: 'active',
      createdAt: nowIso(deps),
    }
  } else if (description !== undefined) {
    return invalid('string: required with a version description (a description belongs to a new version)', 'string')
  }
  const current = version ?? (await deps.store.findPartialVersion(partial.id, { kind: 'latest' }))
  const updated: PartialRecord = {
    ...partial,
    name: input.name ?? partial.name,
    status: input.status ?? partial.status,
    latestVersion: version?.version ?? partial.latestVersion,
    lastUpdatedAt: nowIso(deps, partial.lastUpdatedAt),
  }
  await commit(request, 200, async (writer) => {
    requireApplied(await writer.updatePartial(updated, partial.lastUpdatedAt))
    if (version !== null) await writer.insertPartialVersion(version)
  })
  publishPromptChange(deps, workspace.id)
  return jsonReply(200, { id: partial.id, slug: partial.slug, prompt_partial_version_id: current?.id ?? null, version: current?.version ?? null })
}

async function deletePartial(request: AdminRequest): Promise<Reply | GatewayError> {
  const body = parseBody(request.ctx, deletePartialBody)
  if (!body.ok) return body.error
  const found = await changeablePartial(request, body.value.workspace_id)
  if (found instanceof GatewayError) return found
  const { deps, principal } = request
  await commit(request, 200, (writer) => writer.deletePartial(principal.organisationId, found.partial.id).then(requireApplied))
  publishPromptChange(deps, found.workspace.id)
  return jsonReply(200, {})
}

/** Every version, newest first, as a bare array. */
async function listPartialVersions(request: AdminRequest): Promise<Reply | GatewayError> {
  const found = await visiblePartial(request, undefined)
  if (found instanceof GatewayError) return found
  const versions = await request.deps.store.listPartialVersions(found.partial.id)
  return jsonReply(200, versions.map((version) => partialVersionItem(found.partial, version)))
}

async function publishPartial(request: AdminRequest): Promise<Reply | GatewayError> {
  const body = parseBody(request.ctx, publishPartialBody)
  if (!body.ok) return body.error
  const found = await changeablePartial(request, body.value.workspace_id)
  if (found instanceof GatewayError) return found
  const { deps } = request
  const { partial, workspace } = found
  const version = await deps.store.findPartialVersion(partial.id, { kind: 'number', version: body.value.version })
  if (version === null) return notFound('Partial version')
  const updated: PartialRecord = { ...partial, publishedVersion: version.version, lastUpdatedAt: nowIso(deps, partial.lastUpdatedAt) }
  await commit(request, 200, (writer) => writer.updatePartial(updated, partial.lastUpdatedAt).then(requireApplied))
  publishPromptChange(deps, workspace.id)
  return jsonReply(200, {})
}

export const partialHandlers: HandlerMap = {
  'prompts.partials.create': createPartial,
  'prompts.partials.list': listPartials,
  'prompts.partials.get': getPartial,
  'prompts.partials.update': updatePartial,
  'prompts.partials.delete': deletePartial,
  'prompts.partials.versions.list': listPartialVersions,
  'prompts.partials.publish': publishPartial,
}
