/**
 * Workspaces and their members (`/v1/admin/workspaces…`, API.md §5). Admin keys create and
 * delete workspaces; workspace admins and managers change their workspace and its members; only a
 * workspace admin grants the admin role. Every route on one workspace's path also takes an
 * optional `workspace_id` (query; body on writes; either on DELETE) that must name the workspace
 * of the path, else 404 (access.ts `checkNamedWorkspace`).
 */
import { randomBytes, randomUUID } from 'node:crypto'
import type { ApiKeyRecord, UserRecord, WorkspaceRecord, WorkspaceRole } from '../../core/admin-records.js'
import type { BudgetUsage } from '../../core/budgets.js'
import { CHANGE_CHANNELS } from '../../core/channels.js'
import type { Principal } from '../../core/context.js'
import { ERRORS, GatewayError, gatewayError } from '../../core/errors.js'
import { jsonReply, type Reply } from '../../core/plugin.js'
import type { AdminWriter } from '../../core/ports.js'
import { canManage, checkNamedWorkspace, rankOf, RANKS, userRank, visibleWorkspace } from './access.js'
import { checkedDefaults } from './configs.js'
import { rateLimitsOf, usageLimitOf } from './inputs.js'
import {
  budgetUsage,
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
import {
  addMembersBody,
  createWorkspaceBody,
  deleteWorkspaceBody,
  deleteWorkspaceQuery,
  listMembersQuery,
  listWorkspacesQuery,
  updateMemberBody,
  updateWorkspaceBody,
  workspaceIdBody,
} from './schemas.js'
import { listView, memberView, workspaceView } from './views.js'

/** How many members `GET /admin/workspaces/{id}` embeds (the members list pages past that). */
const EMBEDDED_MEMBERS = 1000

/** `My Team!` → `my-team` (at most 20 characters). */
function slugPart(name: string): string {
  const slug = name.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 20).replace(/-+$/, '')
  return slug.length > 0 ? slug : 'workspace'
}

/** The budget state of the workspace's usage limits (see `budgetUsage`). */
function workspaceUsage(deps: AdminDeps, workspace: WorkspaceRecord): Promise<readonly BudgetUsage[] | undefined> {
  return budgetUsage(deps, { kind: 'workspace', id: workspace.id }, workspace.id, workspace.usageLimits)
}

/** Evicts cached copies of deleted or changed API keys on every instance. */
export function publishKeyChanges(deps: AdminDeps, keys: readonly ApiKeyRecord[]): void {
  for (const key of keys) {
    deps.notifier.publish(CHANGE_CHANNELS.apiKeys, key.keyHash)
    if (key.previousKeyHash !== null) deps.notifier.publish(CHANGE_CHANNELS.apiKeys, key.previousKeyHash)
  }
}

/** The workspace of the path, visible to the caller and the one `workspace_id` names (if named), or 404. */
async function pathWorkspace(request: AdminRequest, namedInBody: string | undefined): Promise<WorkspaceRecord | GatewayError> {
  const workspace = await visibleWorkspace(request.deps, request.principal, request.ctx.params.workspaceId)
  if (workspace === null) return notFound('Workspace')
  const misnamed = await checkNamedWorkspace(request, namedInBody, workspace.id, 'Workspace')
  if (misnamed !== null) return misnamed
  noteAction(request.ctx, { workspaceId: workspace.id })
  return workspace
}

/** The workspace of the path if the caller may manage it; 404 when invisible, 403 when read-only. */
async function managedWorkspace(request: AdminRequest, namedInBody: string | undefined): Promise<WorkspaceRecord | GatewayError> {
  const workspace = await pathWorkspace(request, namedInBody)
  if (workspace instanceof GatewayError) return workspace
  if (!(await canManage(request.deps, request.principal, workspace))) return forbidden('Only workspace admins and managers can change this workspace')
  return workspace
}

/** A role is granted only by a caller of at least that rank: only workspace admins grant admin. */
async function mayGrant(deps: AdminDeps, principal: Principal, workspace: WorkspaceRecord, role: WorkspaceRole): Promise<boolean> {
  return RANKS[role] <= (await rankOf(deps, principal, workspace))
}

/**
 * 403 when the member outranks the caller (API.md §1: no privilege gained through another user):
 * their role cannot be changed nor their membership, and with it their keys, removed. An
 * organisation owner or admin outranks every workspace role, whatever their membership says.
 */
async function outrankingMember(deps: AdminDeps, principal: Principal, workspace: WorkspaceRecord, member: { user: UserRecord }): Promise<GatewayError | null> {
  if ((await userRank(deps, member.user, workspace)) <= (await rankOf(deps, principal, workspace))) return null
  return forbidden('This member has a higher role than yours: only someone of at least their rank can change or remove them')
}

/** Deletes a user's `workspace-user` keys in one workspace (membership removed → keys revoked). */
async function revokeUserKeys(deps: AdminDeps, writer: AdminWriter, workspace: WorkspaceRecord, userId: string): Promise<ApiKeyRecord[]> {
  const keys = await deps.store.listApiKeys(workspace.organisationId, { workspaceId: workspace.id, types: ['workspace-user'] }, { offset: 0, limit: 10_000 })
  const revoked: ApiKeyRecord[] = []
  for (const key of keys.items) {
    if (key.userId !== userId) continue
    const deleted = await writer.deleteApiKey(workspace.organisationId, key.id)
    if (deleted !== null) revoked.push(deleted)
  }
  return revoked
}

async function createWorkspace(request: AdminRequest): Promise<Reply | GatewayError> {
  const body = parseBody(request.ctx, createWorkspaceBody)
  if (!body.ok) return body.error
  const { deps, principal } = request
  const input = body.value
  const userIds = [...new Set(input.users ?? [])]
  for (const userId of userIds) {
    if ((await deps.store.findUser(principal.organisationId, userId)) === null) return notFound(`User ${userId}`)
  }
  const id = randomUUID()
  // A new workspace has no configs yet, so a `config_id` here names none of its own (400).
  const defaults = await checkedDefaults(deps, principal, input.defaults, id)
  if (defaults instanceof GatewayError) return defaults
  const now = nowIso(deps)
  const workspace: WorkspaceRecord = {
    id,
    slug: `ws-${slugPart(input.name)}-${randomBytes(3).toString('hex')}`,
    organisationId: principal.organisationId,
    name: input.name,
    description: input.description ?? null,
    defaults,
    usageLimits: (input.usage_limits ?? []).map(usageLimitOf),
    rateLimits: rateLimitsOf(input.rate_limits),
    createdAt: now,
    lastUpdatedAt: now,
  }
  noteAction(request.ctx, { workspaceId: workspace.id, resourceId: workspace.slug })
  await commit(request, 200, async (writer) => {
    await writer.insertWorkspace(workspace)
    for (const userId of userIds) {
      await writer.insertMember({ workspaceId: workspace.id, userId, organisationId: principal.organisationId, role: 'member', createdAt: now, lastUpdatedAt: now })
    }
  })
  return jsonReply(200, workspaceView(workspace, await workspaceUsage(deps, workspace)))
}

async function listWorkspaces(request: AdminRequest): Promise<Reply | GatewayError> {
  const query = parseQuery(request.ctx, listWorkspacesQuery)
  if (!query.ok) return query.error
  const { deps, principal } = request
  const { current_page, page_size, name, exact_name } = query.value
  const page = await deps.store.listWorkspaces(
    principal.organisationId,
    {
      ...(name === undefined ? {} : { name }),
      ...(exact_name === undefined ? {} : { exactName: exact_name }),
      // A workspace key lists only its own workspace.
      ...(principal.workspaceId === null ? {} : { ids: [principal.workspaceId] }),
    },
    pageOf(current_page, page_size),
  )
  const data = []
  for (const workspace of page.items) data.push(workspaceView(workspace, await workspaceUsage(deps, workspace)))
  return jsonReply(200, listView(page.total, data))
}

async function getWorkspace(request: AdminRequest): Promise<Reply | GatewayError> {
  const workspace = await pathWorkspace(request, undefined)
  if (workspace instanceof GatewayError) return workspace
  const members = await request.deps.store.listMembers(workspace.id, {}, { offset: 0, limit: EMBEDDED_MEMBERS })
  const usage = await workspaceUsage(request.deps, workspace)
  return jsonReply(200, { ...workspaceView(workspace, usage), users: members.items.map((entry) => memberView(entry, workspace)) })
}

async function updateWorkspace(request: AdminRequest): Promise<Reply | GatewayError> {
  const body = parseBody(request.ctx, updateWorkspaceBody)
  if (!body.ok) return body.error
  const workspace = await managedWorkspace(request, body.value.workspace_id)
  if (workspace instanceof GatewayError) return workspace
  const { deps, principal } = request
  const input = body.value
  let defaults = workspace.defaults
  if (input.defaults !== undefined) {
    const checked = await checkedDefaults(deps, principal, input.defaults, workspace.id)
    if (checked instanceof GatewayError) return checked
    defaults = checked
  }
  const updated: WorkspaceRecord = {
    ...workspace,
    name: input.name ?? workspace.name,
    description: input.description === undefined ? workspace.description : input.description,
    defaults,
    usageLimits: input.usage_limits === undefined ? workspace.usageLimits : (input.usage_limits ?? []).map(usageLimitOf),
    rateLimits: input.rate_limits === undefined ? workspace.rateLimits : rateLimitsOf(input.rate_limits),
    lastUpdatedAt: nowIso(deps, workspace.lastUpdatedAt),
  }
  await commit(request, 200, (writer) => writer.updateWorkspace(updated, workspace.lastUpdatedAt).then(requireApplied))
  deps.notifier.publish(CHANGE_CHANNELS.workspaces, workspace.id)
  return jsonReply(200, workspaceView(updated, await workspaceUsage(deps, updated)))
}

async function deleteWorkspace(request: AdminRequest): Promise<Reply | GatewayError> {
  const body = parseBody(request.ctx, deleteWorkspaceBody)
  if (!body.ok) return body.error
  const query = parseQuery(request.ctx, deleteWorkspaceQuery)
  if (!query.ok) return query.error
  const workspace = await pathWorkspace(request, body.value.workspace_id)
  if (workspace instanceof GatewayError) return workspace
  const { deps, principal } = request
  if (body.value.name !== undefined && body.value.name !== workspace.name) return invalid('name: does not match the workspace name', 'name')
  const force = body.value.force_delete ?? query.value.force_delete === 'true'
  if (!force) {
    const dependants = await deps.store.workspaceDependants(principal.organisationId, workspace.id)
    const blocking = Object.entries(dependants).filter(([, count]) => count > 0)
    if (blocking.length > 0) {
      const names: Record<string, string> = { apiKeys: 'API keys', virtualKeys: 'virtual keys', configs: 'configs', prompts: 'prompts' }
      const list = blocking.map(([kind, count]) => `${count} ${names[kind] ?? kind}`).join(', ')
      return gatewayError(ERRORS.GW_ADMIN_DEPENDANTS, `Unable to delete: the workspace still has ${list}. Delete them first, or send "force_delete": true`)
    }
  }
  // Its configs go with it: their compiled plans are dropped on every instance too.
  const configs = await deps.store.listConfigs(principal.organisationId, { workspaceId: workspace.id }, { offset: 0, limit: 10_000 })
  const revoked = await commit(request, 200, (writer) => writer.deleteWorkspace(principal.organisationId, workspace.id))
  publishKeyChanges(deps, revoked)
  deps.notifier.publish(CHANGE_CHANNELS.workspaces, workspace.id)
  for (const config of configs.items) deps.notifier.publish(CHANGE_CHANNELS.configs, config.id)
  return jsonReply(200, {})
}

async function addMembers(request: AdminRequest): Promise<Reply | GatewayError> {
  const body = parseBody(request.ctx, addMembersBody)
  if (!body.ok) return body.error
  const workspace = await managedWorkspace(request, body.value.workspace_id)
  if (workspace instanceof GatewayError) return workspace
  const { deps, principal } = request
  const seen = new Set<string>()
  for (const [index, entry] of body.value.users.entries()) {
    if (seen.has(entry.id)) return invalid(`users.${index}.id: listed twice`, 'users')
    seen.add(entry.id)
    // A user must belong to the organisation before joining one of its workspaces.
    if ((await deps.store.findUser(principal.organisationId, entry.id)) === null) return notFound(`User ${entry.id}`)
    if (!(await mayGrant(deps, principal, workspace, entry.role))) return forbidden('Only workspace admins can grant the admin role')
  }
  const now = nowIso(deps)
  await commit(request, 200, async (writer) => {
    for (const entry of body.value.users) {
      await writer.insertMember({ workspaceId: workspace.id, userId: entry.id, organisationId: principal.organisationId, role: entry.role, createdAt: now, lastUpdatedAt: now })
    }
  })
  return jsonReply(200, {})
}

async function listMembers(request: AdminRequest): Promise<Reply | GatewayError> {
  const query = parseQuery(request.ctx, listMembersQuery)
  if (!query.ok) return query.error
  const workspace = await pathWorkspace(request, undefined)
  if (workspace instanceof GatewayError) return workspace
  const { current_page, page_size, role, email } = query.value
  const page = await request.deps.store.listMembers(
    workspace.id,
    { ...(role === undefined ? {} : { role }), ...(email === undefined ? {} : { email }) },
    pageOf(current_page, page_size),
  )
  return jsonReply(200, listView(page.total, page.items.map((entry) => memberView(entry, workspace))))
}

async function getMember(request: AdminRequest): Promise<Reply | GatewayError> {
  const workspace = await pathWorkspace(request, undefined)
  if (workspace instanceof GatewayError) return workspace
  const entry = await request.deps.store.findMember(workspace.id, request.ctx.params.userId ?? '')
  return entry === null ? notFound('Workspace member') : jsonReply(200, memberView(entry, workspace))
}

async function updateMember(request: AdminRequest): Promise<Reply | GatewayError> {
  const body = parseBody(request.ctx, updateMemberBody)
  if (!body.ok) return body.error
  const workspace = await managedWorkspace(request, body.value.workspace_id)
  if (workspace instanceof GatewayError) return workspace
  const { deps, principal } = request
  const entry = await deps.store.findMember(workspace.id, request.ctx.params.userId ?? '')
  if (entry === null) return notFound('Workspace member')
  const grantsOrRevokesAdmin = body.value.role === 'admin' || entry.member.role === 'admin'
  if (grantsOrRevokesAdmin && (await rankOf(deps, principal, workspace)) < RANKS.admin) return forbidden('Only workspace admins can grant or revoke the admin role')
  const outranking = await outrankingMember(deps, principal, workspace, entry)
  if (outranking !== null) return outranking
  const updated = { ...entry.member, role: body.value.role, lastUpdatedAt: nowIso(deps, entry.member.lastUpdatedAt) }
  await commit(request, 200, (writer) => writer.updateMember(updated, entry.member.lastUpdatedAt).then(requireApplied))
  return jsonReply(200, memberView({ member: updated, user: entry.user }, workspace))
}

async function deleteMember(request: AdminRequest): Promise<Reply | GatewayError> {
  const body = parseBody(request.ctx, workspaceIdBody)
  if (!body.ok) return body.error
  const workspace = await managedWorkspace(request, body.value.workspace_id)
  if (workspace instanceof GatewayError) return workspace
  const { deps, principal } = request
  const entry = await deps.store.findMember(workspace.id, request.ctx.params.userId ?? '')
  if (entry === null) return notFound('Workspace member')
  if (entry.member.role === 'admin' && (await rankOf(deps, principal, workspace)) < RANKS.admin) return forbidden('Only workspace admins can remove an admin')
  const outranking = await outrankingMember(deps, principal, workspace, entry)
  if (outranking !== null) return outranking
  const revoked = await commit(request, 200, async (writer) => {
    await writer.deleteMember(workspace.id, entry.user.id)
    return revokeUserKeys(deps, writer, workspace, entry.user.id)
  })
  publishKeyChanges(deps, revoked)
  return jsonReply(200, {})
}

export const workspaceHandlers: HandlerMap = {
  'admin.workspaces.create': createWorkspace,
  'admin.workspaces.list': listWorkspaces,
  'admin.workspaces.get': getWorkspace,
  'admin.workspaces.update': updateWorkspace,
  'admin.workspaces.delete': deleteWorkspace,
  'admin.workspaces.members.add': addMembers,
  'admin.workspaces.members.list': listMembers,
  'admin.workspaces.members.get': getMember,
  'admin.workspaces.members.update': updateMember,
  'admin.workspaces.members.delete': deleteMember,
}
