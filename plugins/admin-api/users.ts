/**
 * Users of the organisation (`/v1/admin/users…`, API.md §5): list, read, change the organisation
 * role, remove. Admin API keys only (the route table says so). The owner keeps their role and
 * cannot be removed, so an organisation always has one.
 */
import type { UserRecord } from '../../core/admin-records.js'
import { GatewayError } from '../../core/errors.js'
import { jsonReply, type Reply } from '../../core/plugin.js'
import {
  commit,
  forbidden,
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
import { listUsersQuery, updateUserBody } from './schemas.js'
import { listView, userView } from './views.js'
import { publishKeyChanges } from './workspaces.js'

/**
 * Workspace UUID → slug, remembered for one request: a page of users mostly shares a handful of
 * workspaces. A workspace deleted meanwhile keeps its UUID.
 */
export function workspaceSlugs(deps: AdminDeps, organisationId: string): (workspaceId: string) => Promise<string> {
  const known = new Map<string, Promise<string>>()
  return (workspaceId) => {
    let slug = known.get(workspaceId)
    if (slug === undefined) {
      slug = deps.store.findWorkspace(organisationId, workspaceId).then((workspace) => workspace?.slug ?? workspaceId)
      known.set(workspaceId, slug)
    }
    return slug
  }
}

/** The user's view with the slugs of the workspaces they belong to. */
async function userWithWorkspaces(deps: AdminDeps, user: UserRecord, slugOf = workspaceSlugs(deps, user.organisationId)): Promise<Record<string, unknown>> {
  const memberships = await deps.store.listMembershipsOfUser(user.organisationId, user.id)
  const slugs = await Promise.all(memberships.map((membership) => slugOf(membership.workspaceId)))
  return userView(user, slugs)
}

/** The user of the path, or 404. */
async function pathUser(request: AdminRequest): Promise<UserRecord | GatewayError> {
  const userId = request.ctx.params.userId ?? ''
  noteAction(request.ctx, { resourceId: userId })
  const user = await request.deps.store.findUser(request.principal.organisationId, userId)
  return user ?? notFound('User')
}

async function listUsers(request: AdminRequest): Promise<Reply | GatewayError> {
  const query = parseQuery(request.ctx, listUsersQuery)
  if (!query.ok) return query.error
  const { deps, principal } = request
  const { currentPage, pageSize, role, email } = query.value
  const page = await deps.store.listUsers(
    principal.organisationId,
    { ...(role === undefined ? {} : { role }), ...(email === undefined ? {} : { email }) },
    pageOf(currentPage, pageSize),
  )
  const slugOf = workspaceSlugs(deps, principal.organisationId)
  const data = await Promise.all(page.items.map((user) => userWithWorkspaces(deps, user, slugOf)))
  return jsonReply(200, listView(page.total, data))
}

async function getUser(request: AdminRequest): Promise<Reply | GatewayError> {
  const user = await pathUser(request)
  if (user instanceof GatewayError) return user
  return jsonReply(200, await userWithWorkspaces(request.deps, user))
}

async function updateUser(request: AdminRequest): Promise<Reply | GatewayError> {
  const body = parseBody(request.ctx, updateUserBody)
  if (!body.ok) return body.error
  const user = await pathUser(request)
  if (user instanceof GatewayError) return user
  if (user.role === 'owner') return forbidden("The organisation owner's role cannot be changed")
  const { deps } = request
  const updated: UserRecord = { ...user, role: body.value.role, lastUpdatedAt: nowIso(deps, user.lastUpdatedAt) }
  await commit(request, 200, (writer) => writer.updateUser(updated, user.lastUpdatedAt).then(requireApplied))
  return jsonReply(200, await userWithWorkspaces(deps, updated))
}

async function deleteUser(request: AdminRequest): Promise<Reply | GatewayError> {
  const user = await pathUser(request)
  if (user instanceof GatewayError) return user
  if (user.role === 'owner') return forbidden('The organisation owner cannot be removed')
  const { deps, principal } = request
  const revoked = await commit(request, 200, (writer) => writer.deleteUser(principal.organisationId, user.id))
  // The user's workspace keys stop working on every instance now, not when caches expire.
  publishKeyChanges(deps, revoked)
  return jsonReply(200, {})
}

export const userHandlers: HandlerMap = {
  'admin.users.list': listUsers,
  'admin.users.get': getUser,
  'admin.users.update': updateUser,
  'admin.users.delete': deleteUser,
}
