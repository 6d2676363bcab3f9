/**
 * Who may see and change what (API.md §1), on top of the route's scope check:
 * - an Admin API key (organisation-service) reaches every workspace of its organisation, naming it
 *   with `workspace_id`; it acts with organisation-admin rights;
 * - a workspace key or JWT is locked to its workspace; another workspace is reported as not found
 *   (never revealed);
 * - inside its workspace a service key or JWT acts as a manager; a user key acts with its user's
 *   rights: organisation owners and admins are admins of every workspace, others have the role of
 *   their membership (members are read-only).
 */
import type { ApiKeyType, Principal } from '../../core/context.js'
import type { WorkspaceRecord, WorkspaceRole } from '../../core/ports.js'
import type { AdminDeps } from './request.js'

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

/** The caller's effective role in a workspace it can see (`null`: no rights there at all). */
export async function roleIn(deps: AdminDeps, principal: Principal, workspace: WorkspaceRecord): Promise<WorkspaceRole | null> {
  if (isAdminKey(principal)) return 'admin'
  if (principal.workspaceId !== workspace.id) return null
  if (principal.kind === 'jwt' || principal.keyType === 'workspace-service') return 'manager'
  if (principal.userId === null) return 'member'
  const user = await deps.store.findUser(principal.organisationId, principal.userId)
  if (user === null) return null
  if (user.role === 'owner' || user.role === 'admin') return 'admin'
  const membership = await deps.store.findMember(workspace.id, user.id)
  return membership?.member.role ?? null
}

/** Whether the caller may change a workspace's settings, members and keys. */
export async function canManage(deps: AdminDeps, principal: Principal, workspace: WorkspaceRecord): Promise<boolean> {
  const role = await roleIn(deps, principal, workspace)
  return role === 'admin' || role === 'manager'
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
