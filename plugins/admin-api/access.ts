/**
 * Who may see and change what (API.md §1), on top of the route's scope check:
 * - an Admin API key (organisation-service) reaches every workspace of its organisation, naming it
 *   with `workspace_id`; it acts with the organisation owner's rank (`RANKS.owner`). On a resource's own path,
 *   `workspace_id` must name that resource's workspace, else 404 (`checkNamedWorkspace`);
 * - a workspace key or JWT is locked to its workspace; another workspace is reported as not found
 *   (never revealed);
 * - inside its workspace a service key or JWT acts as a manager; a user key acts with its user's
 *   rights: organisation owners and admins are admins of every workspace, others have the role of
 *   their membership (members are read-only);
 * - no privilege is gained through another key or user: acting on a key (create, update, rotate,
 *   delete) needs the caller's own rights to cover every scope of that key and, for a user key, a
 *   rank no lower than that user's; granting or changing a member's role likewise (`rankOf`,
 *   `userRank`, `coversScope`).
 */
import type { ApiKeyType, UserRecord, WorkspaceRecord } from '../../core/admin-records.js'
import type { Principal } from '../../core/context.js'
import { GatewayError } from '../../core/errors.js'
import { ADMIN_KEY_SCOPES } from '../../core/scopes.js'
import { forbidden, noteAction, notFound, parseQuery, type AdminDeps, type AdminRequest } from './request.js'
import { workspaceIdQuery } from './schemas.js'

/**
 * Standing inside one workspace, lowest first. Organisation owners and admins act as workspace
 * admins everywhere but outrank them, so a workspace admin cannot act for them; an Admin API key is
 * the organisation's own credential and outranks everyone.
 */
export const RANKS = { none: 0, member: 1, manager: 2, admin: 3, organisationAdmin: 4, owner: 5 } as const

const ADMIN_KEY_SCOPE_SET: ReadonlySet<string> = new Set(ADMIN_KEY_SCOPES)

export function isAdminKey(principal: Principal): boolean {
  return principal.keyType === 'organisation-service'
}

/**
 * The workspace named by `idOrSlug` if the caller may see it; `null` when it does not exist or
 * belongs to another workspace than the caller's.
 */
export async function visibleWorkspace(deps: AdminDeps, principal: Principal, idOrSlug: string | undefined): Promise<WorkspaceRecord | null> {
  if (idOrSlug === undefined || idOrSlug.length === 0) return null
  const workspace = await deps.store.findWorkspace(principal.organisationId, idOrSlug)
  if (workspace === null) return null
  if (principal.workspaceId !== null && principal.workspaceId !== workspace.id) return null
  return workspace
}

/**
 * The workspace a workspace-level request is about: the one named (`workspace_id`), or the
 * caller's own. Admin keys must name it.
 */
export async function targetWorkspace(
  deps: AdminDeps,
  principal: Principal,
  named: string | undefined,
): Promise<{ ok: true; workspace: WorkspaceRecord } | { ok: false; missing: boolean }> {
  const idOrSlug = named ?? principal.workspaceId ?? undefined
  if (idOrSlug === undefined) return { ok: false, missing: true }
  const workspace = await visibleWorkspace(deps, principal, idOrSlug)
  return workspace === null ? { ok: false, missing: false } : { ok: true, workspace }
}

/**
 * API.md §1: a caller names the workspace it acts in with `workspace_id`, in the query on reads, in
 * the body on writes, in either on DELETE. On a route whose path names the resource (a key, a
 * member, an export, ...) the path already selects it, so `workspace_id` is a check, not a
 * selector: every `workspace_id` given (`fromBody`, and the query's) must name the workspace the
 * resource lives in (`resourceWorkspaceId`; `null` for a resource of no workspace, such as an
 * Admin API key, which no `workspace_id` names). Otherwise the answer is the same 404 as for a
 * resource of another workspace, so it reveals nothing. A workspace key or JWT may name only its
 * own workspace (`visibleWorkspace`). Every such route calls this, so the rule lives here.
 *
 * @param what the resource as the 404 names it (`Virtual key` → "Virtual key not found")
 * @returns the error to answer (404, or 400 for a malformed query), or `null` when the names match
 */
export async function checkNamedWorkspace(request: AdminRequest, fromBody: string | undefined, resourceWorkspaceId: string | null, what: string): Promise<GatewayError | null> {
  const query = parseQuery(request.ctx, workspaceIdQuery)
  if (!query.ok) return query.error
  const named = new Set<string>()
  if (fromBody !== undefined) named.add(fromBody)
  if (query.value.workspace_id !== undefined) named.add(query.value.workspace_id)
  for (const idOrSlug of named) {
    if (resourceWorkspaceId === null) return notFound(what)
    const workspace = await visibleWorkspace(request.deps, request.principal, idOrSlug)
    if (workspace === null || workspace.id !== resourceWorkspaceId) return notFound(what)
  }
  return null
}

/**
 * The workspace of a resource found by its own path (a prompt, partial, label, collection), if the
 * caller may see it: a workspace key or JWT only in its own workspace, and every `workspace_id`
 * named (`namedInBody`, the query's) must be the resource's (`checkNamedWorkspace`). Otherwise the
 * 404 for `what`, the same answer as for a resource that does not exist. Notes the workspace and
 * resource for the audit entry.
 */
export async function resourceWorkspace(
  request: AdminRequest,
  resource: { readonly id: string; readonly workspaceId: string },
  namedInBody: string | undefined,
  what: string,
): Promise<WorkspaceRecord | GatewayError> {
  const { deps, principal, ctx } = request
  if (principal.workspaceId !== null && resource.workspaceId !== principal.workspaceId) return notFound(what)
  const workspace = await deps.store.findWorkspace(principal.organisationId, resource.workspaceId)
  if (workspace === null) return notFound(what)
  const misnamed = await checkNamedWorkspace(request, namedInBody, workspace.id, what)
  if (misnamed !== null) return misnamed
  noteAction(ctx, { workspaceId: workspace.id, resourceId: resource.id })
  return workspace
}

/**
 * The workspace of a resource the path names (`record`, `null` when no such resource exists), if the
 * caller may see it (`resourceWorkspace`; otherwise the 404 for `what`) and, when `changing` names the
 * resource kind (`'prompts'`), may also change it: 403 for read-only members.
 */
export async function pathResourceWorkspace(
  request: AdminRequest,
  record: { readonly id: string; readonly workspaceId: string } | null,
  namedInBody: string | undefined,
  what: string,
  changing: string | null,
): Promise<WorkspaceRecord | GatewayError> {
  if (record === null) return notFound(what)
  const workspace = await resourceWorkspace(request, record, namedInBody, what)
  if (workspace instanceof GatewayError || changing === null) return workspace
  if (!(await canManage(request.deps, request.principal, workspace))) return forbidden(`Only workspace admins and managers can change ${changing}`)
  return workspace
}

/** The workspace a list is narrowed to, with its slug; `null` workspace: the whole organisation. */
export interface ListScope {
  readonly workspaceId: string | undefined
  /** Workspace slugs by id, for the rows (the scope's own, when there is one). */
  readonly slugs: Map<string, string>
}

/**
 * The workspace a list request covers: the one its `workspace_id` names, else the caller's own (a
 * workspace key or JWT), else every workspace of the organisation. An unknown or invisible one is 404.
 */
export async function listScope(request: AdminRequest, workspaceIdParam: string | undefined): Promise<ListScope | GatewayError> {
  const { deps, principal } = request
  const slugs = new Map<string, string>()
  if (workspaceIdParam === undefined && principal.workspaceId === null) return { workspaceId: undefined, slugs }
  const workspace = await visibleWorkspace(deps, principal, workspaceIdParam ?? principal.workspaceId ?? undefined)
  if (workspace === null) return notFound('Workspace')
  slugs.set(workspace.id, workspace.slug)
  return { workspaceId: workspace.id, slugs }
}

/** A user's rank in `workspace` (`RANKS`): their organisation role, else their membership's role. */
export async function userRank(deps: AdminDeps, user: UserRecord, workspace: WorkspaceRecord): Promise<number> {
  if (user.role === 'owner') return RANKS.owner
  if (user.role === 'admin') return RANKS.organisationAdmin
  const membership = await deps.store.findMember(workspace.id, user.id)
  return membership === null ? RANKS.none : RANKS[membership.member.role]
}

/** The caller's rank in a workspace (`RANKS.none` for one it cannot see). */
export async function rankOf(deps: AdminDeps, principal: Principal, workspace: WorkspaceRecord): Promise<number> {
  if (isAdminKey(principal)) return RANKS.owner
  if (principal.workspaceId !== workspace.id) return RANKS.none
  if (principal.kind === 'jwt' || principal.keyType === 'workspace-service') return RANKS.manager
  if (principal.userId === null) return RANKS.member
  const user = await deps.store.findUser(principal.organisationId, principal.userId)
  return user === null ? RANKS.none : userRank(deps, user, workspace)
}

/** Whether the caller may change a workspace's settings, members and keys (admins and managers). */
export async function canManage(deps: AdminDeps, principal: Principal, workspace: WorkspaceRecord): Promise<boolean> {
  return (await rankOf(deps, principal, workspace)) >= RANKS.manager
}

/** `organisation-service` → `organisation_service_api_keys`: the scope resource of a key type. */
export function keyScopeResource(type: ApiKeyType): string {
  return `${type.replace('-', '_')}_api_keys`
}

/** Whether the caller holds `<resource of type>.<action>` (e.g. `workspace_user_api_keys.rotate`). */
export function hasKeyScope(principal: Principal, type: ApiKeyType, ...actions: string[]): boolean {
  const resource = keyScopeResource(type)
  return actions.some((action) => principal.scopes.has(`${resource}.${action}`))
}

/**
 * Whether the caller's own rights cover `scope` on a key of `type`: it holds the scope itself, or it
 * is an Admin API key and the scope is a workspace-only one that no Admin API key can hold
 * (`completions.write`, `logs.write`, ...). A scope both kinds of key can hold (`virtual_keys.update`)
 * is covered only when held.
 */
export function coversScope(principal: Principal, type: ApiKeyType, scope: string): boolean {
  if (principal.scopes.has(scope)) return true
  return isAdminKey(principal) && type !== 'organisation-service' && !ADMIN_KEY_SCOPE_SET.has(scope)
}

/** The first of `scopes` the caller's rights do not cover (`coversScope`), or `undefined`. */
export function uncoveredScope(principal: Principal, type: ApiKeyType, scopes: Iterable<string>): string | undefined {
  for (const scope of scopes) if (!coversScope(principal, type, scope)) return scope
  return undefined
}
