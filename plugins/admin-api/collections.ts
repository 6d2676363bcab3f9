/**
 * Collections (`/v1/collections…`, API.md §5, reference/admin-api.md §13.3): folders of prompts in
 * a workspace, optionally nested (`parent_collection_id`, a collection of the same workspace).
 * Every workspace has one default collection (`is_default`), made on first use: a prompt created
 * without `collection_id` goes there.
 *
 * Rules on top of the route's scope check (`prompts.*`; collections have no scopes of their own):
 * workspaces as for virtual keys (an Admin API key names `workspace_id`; a workspace key or JWT is
 * locked to its workspace; another workspace's collection is 404); creating, renaming and deleting
 * need a workspace admin or manager (members are read-only). A collection that still holds
 * prompts, partials or child collections cannot be deleted (409). Every change is audited in the
 * same transaction and published on the `prompts` channel.
 */
import { randomUUID } from 'node:crypto'
import { z } from 'zod'
import type { CollectionRecord, WorkspaceRecord } from '../../core/admin-records.js'
import type { Principal } from '../../core/context.js'
import { ERRORS, GatewayError, isGatewayError } from '../../core/errors.js'
import { jsonReply, type Reply } from '../../core/plugin.js'
import { canManage, listScope, pathResourceWorkspace, targetWorkspace } from './access.js'
import { newSlug, publishPromptChange } from './prompt-templates.js'
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
import { snakePaging, workspaceIdBody, workspaceIdField, workspaceIdQuery } from './schemas.js'
import { listView } from './views.js'

// ---------------------------------------------------------------------------------------------
// Schemas (also used by the OpenAPI document)

const collectionName = z.string().trim().min(1).max(200)
/** A collection's UUID or slug. */
export const collectionRef = z.string().min(1).max(200)

export const createCollectionBody = z
  .object({
    workspace_id: workspaceIdField.optional(),
    name: collectionName,
    parent_collection_id: collectionRef.nullable().optional().describe('A collection of the same workspace (UUID or slug) to nest this one in'),
  })
  .strict()

export const updateCollectionBody = z.object({ workspace_id: workspaceIdField.optional(), name: collectionName }).strict()

export const listCollectionsQuery = z.object({
  ...snakePaging,
  workspace_id: workspaceIdField.optional(),
  search: z.string().max(200).optional().describe('Case-insensitive part of the name or slug'),
})

export const collectionWorkspaceQuery = workspaceIdQuery
export const deleteCollectionBody = workspaceIdBody

// ---------------------------------------------------------------------------------------------
// Helpers (also used by prompts and partials)

/** What the default collection of a workspace is called. */
const DEFAULT_COLLECTION_NAME = 'Default'
/** Collections scanned to count a collection's children (a workspace rarely has more). */
const MAX_COLLECTIONS_SCANNED = 10_000

/** The collection `idOrSlug` names if it belongs to `workspaceId`, else `null` (reported as not found). */
export async function collectionInWorkspace(deps: AdminDeps, principal: Principal, idOrSlug: string, workspaceId: string): Promise<CollectionRecord | null> {
  const collection = await deps.store.findCollection(principal.organisationId, idOrSlug)
  return collection !== null && collection.workspaceId === workspaceId ? collection : null
}

/** A new default collection for a workspace that has none yet (inserted with the prompt that needs it). */
export function newDefaultCollection(organisationId: string, workspaceId: string, now: string): CollectionRecord {
  return {
    id: randomUUID(),
    slug: newSlug(DEFAULT_COLLECTION_NAME, 'collection'),
    organisationId,
    workspaceId,
    name: DEFAULT_COLLECTION_NAME,
    parentCollectionId: null,
    isDefault: true,
    status: 'active',
    createdAt: now,
    lastUpdatedAt: now,
  }
}

/** Writes that failed on a random slug or on a concurrent first use of the default collection are retried. */
export const CREATE_ATTEMPTS = 3

/**
 * Whether a create failed only on something a retry changes: a random slug taken, or a default
 * collection made meanwhile by a concurrent first prompt (the conflict's `param`, the record field).
 */
export function retryableConflict(error: unknown): boolean {
  if (!isGatewayError(error) || error.code !== ERRORS.GW_ADMIN_CONFLICT.code) return false
  return error.param === null ? /slug|default/i.test(error.message) : error.param === 'slug' || error.param === 'isDefault'
}

export function collectionView(collection: CollectionRecord, workspaceSlug: string): Record<string, unknown> {
  return {
    object: 'collection',
    id: collection.id,
    slug: collection.slug,
    name: collection.name,
    workspace_id: workspaceSlug,
    parent_collection_id: collection.parentCollectionId,
    is_default: collection.isDefault,
    status: collection.status,
    created_at: collection.createdAt,
    last_updated_at: collection.lastUpdatedAt,
  }
}

/** Every collection of a workspace (for child counts and `child_collections`). */
async function workspaceCollections(deps: AdminDeps, principal: Principal, workspaceId: string): Promise<readonly CollectionRecord[]> {
  const page = await deps.store.listCollections(principal.organisationId, { workspaceId }, { offset: 0, limit: MAX_COLLECTIONS_SCANNED })
  return page.items
}

interface Found {
  readonly collection: CollectionRecord
  readonly workspace: WorkspaceRecord
}

/** The collection of the path (UUID or slug) if the caller may see it, and with `change` also change it (see `pathResourceWorkspace`). */
async function visibleCollection(request: AdminRequest, namedInBody: string | undefined, change = false): Promise<Found | GatewayError> {
  const collection = await request.deps.store.findCollection(request.principal.organisationId, request.ctx.params.collectionId ?? '')
  const workspace = await pathResourceWorkspace(request, collection, namedInBody, 'Collection', change ? 'collections' : null)
  return workspace instanceof GatewayError ? workspace : { collection: collection!, workspace }
}

/** The collection of the path if the caller may also change it (403 for read-only members). */
function changeableCollection(request: AdminRequest, namedInBody: string | undefined): Promise<Found | GatewayError> {
  return visibleCollection(request, namedInBody, true)
}

// ---------------------------------------------------------------------------------------------
// Handlers

async function createCollection(request: AdminRequest): Promise<Reply | GatewayError> {
  const body = parseBody(request.ctx, createCollectionBody)
  if (!body.ok) return body.error
  const { deps, principal, ctx } = request
  const input = body.value
  const target = await targetWorkspace(deps, principal, input.workspace_id)
  if (!target.ok) return target.missing ? invalid('workspace_id: required with an Admin API key', 'workspace_id') : notFound('Workspace')
  const workspace = target.workspace
  noteAction(ctx, { workspaceId: workspace.id })
  if (!(await canManage(deps, principal, workspace))) return forbidden('Only workspace admins and managers can create collections')
  let parentId: string | null = null
  if (input.parent_collection_id != null) {
    const parent = await collectionInWorkspace(deps, principal, input.parent_collection_id, workspace.id)
    if (parent === null) return notFound('Parent collection')
    parentId = parent.id
  }
  const now = nowIso(deps)
  let record: CollectionRecord = {
    id: randomUUID(),
    slug: newSlug(input.name, 'collection'),
    organisationId: principal.organisationId,
    workspaceId: workspace.id,
    name: input.name,
    parentCollectionId: parentId,
    isDefault: false,
    status: 'active',
    createdAt: now,
    lastUpdatedAt: now,
  }
  noteAction(ctx, { resourceId: record.id })
  for (let attempt = 1; ; attempt++) {
    try {
      await commit(request, 200, (writer) => writer.insertCollection(record))
      break
    } catch (error) {
      if (!retryableConflict(error) || attempt >= CREATE_ATTEMPTS) throw error
      record = { ...record, slug: newSlug(input.name, 'collection') }
    }
  }
  publishPromptChange(deps, workspace.id)
  return jsonReply(200, { id: record.id, slug: record.slug, object: 'collection' })
}

async function listCollections(request: AdminRequest): Promise<Reply | GatewayError> {
  const query = parseQuery(request.ctx, listCollectionsQuery)
  if (!query.ok) return query.error
  const { deps, principal } = request
  const { current_page, page_size, workspace_id, search } = query.value
  const scope = await listScope(request, workspace_id)
  if (scope instanceof GatewayError) return scope
  const { workspaceId, slugs } = scope
  const filter = { ...(workspaceId === undefined ? {} : { workspaceId }), ...(search === undefined ? {} : { search }) }
  const page = await deps.store.listCollections(principal.organisationId, filter, pageOf(current_page, page_size))
  const siblings = new Map<string, readonly CollectionRecord[]>()
  const data = []
  for (const collection of page.items) {
    let slug = slugs.get(collection.workspaceId)
    if (slug === undefined) {
      slug = (await deps.store.findWorkspace(principal.organisationId, collection.workspaceId))?.slug ?? collection.workspaceId
      slugs.set(collection.workspaceId, slug)
    }
    let all = siblings.get(collection.workspaceId)
    if (all === undefined) {
      all = await workspaceCollections(deps, principal, collection.workspaceId)
      siblings.set(collection.workspaceId, all)
    }
    const prompts = await deps.store.listPrompts(principal.organisationId, { workspaceId: collection.workspaceId, collectionId: collection.id }, { offset: 0, limit: 1 })
    data.push({
      ...collectionView(collection, slug),
      collection_details: {
        child_collections_count: all.filter((child) => child.parentCollectionId === collection.id).length,
        prompts_count: prompts.total,
      },
    })
  }
  return jsonReply(200, listView(page.total, data))
}

async function getCollection(request: AdminRequest): Promise<Reply | GatewayError> {
  const found = await visibleCollection(request, undefined)
  if (found instanceof GatewayError) return found
  const { collection, workspace } = found
  const children = (await workspaceCollections(request.deps, request.principal, workspace.id)).filter((child) => child.parentCollectionId === collection.id)
  return jsonReply(200, { ...collectionView(collection, workspace.slug), child_collections: children.map((child) => collectionView(child, workspace.slug)) })
}

async function updateCollection(request: AdminRequest): Promise<Reply | GatewayError> {
  const body = parseBody(request.ctx, updateCollectionBody)
  if (!body.ok) return body.error
  const found = await changeableCollection(request, body.value.workspace_id)
  if (found instanceof GatewayError) return found
  const { deps } = request
  const { collection, workspace } = found
  const updated: CollectionRecord = { ...collection, name: body.value.name, lastUpdatedAt: nowIso(deps, collection.lastUpdatedAt) }
  await commit(request, 200, (writer) => writer.updateCollection(updated, collection.lastUpdatedAt).then(requireApplied))
  publishPromptChange(deps, workspace.id)
  return jsonReply(200, collectionView(updated, workspace.slug))
}

async function deleteCollection(request: AdminRequest): Promise<Reply | GatewayError> {
  const body = parseBody(request.ctx, deleteCollectionBody)
  if (!body.ok) return body.error
  const found = await changeableCollection(request, body.value.workspace_id)
  if (found instanceof GatewayError) return found
  const { deps, principal } = request
  // Deleted meanwhile by another request: a lost race (409), with nothing stored.
  await commit(request, 200, (writer) => writer.deleteCollection(principal.organisationId, found.collection.id).then(requireApplied))
  publishPromptChange(deps, found.workspace.id)
  return jsonReply(200, {})
}

export const collectionHandlers: HandlerMap = {
  'collections.create': createCollection,
  'collections.list': listCollections,
  'collections.get': getCollection,
  'collections.update': updateCollection,
  'collections.delete': deleteCollection,
}
