/**
 * API keys (`/v1/api-keys…`, API.md §1 and §5): create, list, get, update, delete, rotate.
 *
 * Rules on top of the route's scope check:
 * - the scope of the key type acted on is required (`workspace_user_api_keys.delete` to delete a
 *   user key), since one route serves every type;
 * - get, update, rotate and delete take an optional `workspace_id` (query; body on update and
 *   rotate; either on delete) that must name the key's workspace, else 404 (access.ts
 *   `checkNamedWorkspace`; an Admin API key lives in no workspace, so naming one finds nothing);
 * - Admin API keys manage every key of the organisation; a workspace caller manages keys of its
 *   own workspace only, and only as a workspace admin or manager (members are read-only);
 * - no privilege is gained through another key or user (API.md §1): a caller creates, updates,
 *   rotates or deletes a key only when its own rights cover every scope of that key (before and
 *   after the change) and, for a user key, that user's rank in the workspace is no higher than the
 *   caller's; otherwise 403. An Admin API key covers the workspace-only scopes it cannot hold
 *   (`completions.write`, ...), and only those beyond its own (access.ts `coversScope`);
 * - the secret is returned by create and rotate only; reads show the masked form. Rotation keeps
 *   the id and accepts the old secret until `key_transition_expires_at`.
 */
import type { ApiKeyRecord, ApiKeyType, WorkspaceRecord } from '../../core/admin-records.js'
import type { BudgetUsage } from '../../core/budgets.js'
import { CHANGE_CHANNELS } from '../../core/channels.js'
import type { Principal } from '../../core/context.js'
import { ERRORS, GatewayError, gatewayError } from '../../core/errors.js'
import { jsonReply, type Reply } from '../../core/plugin.js'
import { ADMIN_KEY_SCOPES, normaliseScope, WORKSPACE_KEY_SCOPES } from '../../core/scopes.js'
import { hashSecret, issueApiKey, maskSecret, newApiKeySecret } from '../../core/secrets.js'
import {
  canManage,
  checkNamedWorkspace,
  hasKeyScope,
  isAdminKey,
  keyScopeResource,
  rankOf,
  targetWorkspace,
  uncoveredScope,
  userRank,
  visibleWorkspace,
} from './access.js'
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
  type Handler,
  type HandlerMap,
} from './request.js'
import {
  createApiKeyBody,
  listApiKeysQuery,
  MIN_KEY_TRANSITION_MS,
  rotateApiKeyBody,
  updateApiKeyBody,
  workspaceIdBody,
} from './schemas.js'
import { apiKeyView, listView } from './views.js'
import { publishKeyChanges } from './workspaces.js'

const ADMIN_SCOPE_SET = new Set(ADMIN_KEY_SCOPES)
const WORKSPACE_SCOPE_SET = new Set(WORKSPACE_KEY_SCOPES)
const KEY_TYPES: readonly ApiKeyType[] = ['organisation-service', 'workspace-service', 'workspace-user']

/**
 * Normalised, de-duplicated scopes for a key of `type`, or the error naming the first scope that
 * is unknown for that type or that the caller cannot grant (`coversScope`).
 */
function grantableScopes(principal: Principal, type: ApiKeyType, requested: readonly string[]): string[] | GatewayError {
  const allowed = type === 'organisation-service' ? ADMIN_SCOPE_SET : WORKSPACE_SCOPE_SET
  const scopes = [...new Set(requested.map(normaliseScope))]
  for (const scope of scopes) {
    if (!allowed.has(scope)) return invalid(`scopes: "${scope}" is not a valid scope for a ${type} key`, 'scopes')
  }
  const beyond = uncoveredScope(principal, type, scopes)
  if (beyond !== undefined) return forbidden(`scopes: you cannot grant "${beyond}", which your own key does not hold`)
  return scopes
}

/**
 * 403 unless the caller may act for the user a workspace user key belongs to: that user's rank in
 * the workspace must be no higher than the caller's (a manager cannot mint, rotate or delete a
 * workspace admin's or the owner's key, and so act as them).
 */
async function outranked(deps: AdminDeps, principal: Principal, workspace: WorkspaceRecord, userId: string): Promise<GatewayError | null> {
  const user = await deps.store.findUser(principal.organisationId, userId)
  // A user who left the organisation has no standing left to protect.
  if (user === null) return null
  if ((await userRank(deps, user, workspace)) <= (await rankOf(deps, principal, workspace))) return null
  return forbidden("The key's user has a higher role than yours: you cannot create or change keys that act as them")
}

/** 403 unless the caller's rights cover every scope the key holds and, for a user key, its user (`outranked`). */
async function mayActOn(deps: AdminDeps, principal: Principal, key: ApiKeyRecord, workspace: WorkspaceRecord | null): Promise<GatewayError | null> {
  const beyond = uncoveredScope(principal, key.type, key.scopes.map(normaliseScope))
  if (beyond !== undefined) return forbidden(`This key holds "${beyond}", which your own key does not: you cannot change, rotate or delete it`)
  if (key.type !== 'workspace-user' || key.userId === null || workspace === null) return null
  return outranked(deps, principal, workspace, key.userId)
}

/**
 * The key of the path if the caller may see it (404 otherwise), with its workspace; within the
 * `workspace_id` the caller names (body or query), if it names one.
 */
async function visibleKey(request: AdminRequest, namedInBody: string | undefined): Promise<{ key: ApiKeyRecord; workspace: WorkspaceRecord | null } | GatewayError> {
  const { deps, principal, ctx } = request
  const key = await deps.store.findApiKey(principal.organisationId, ctx.params.apiKeyId ?? '')
  if (key === null) return notFound('API key')
  if (principal.workspaceId !== null && key.workspaceId !== principal.workspaceId) return notFound('API key')
  const misnamed = await checkNamedWorkspace(request, namedInBody, key.workspaceId, 'API key')
  if (misnamed !== null) return misnamed
  const workspace = key.workspaceId === null ? null : await deps.store.findWorkspace(principal.organisationId, key.workspaceId)
  noteAction(ctx, { workspaceId: key.workspaceId, resourceId: key.id })
  return { key, workspace }
}

/**
 * The key of the path if the caller may change it with `actions` (any one): the type's scope, for
 * workspace callers the right to manage the key's workspace, and rights that cover the key's own
 * (`mayActOn`).
 */
async function changeableKey(
  request: AdminRequest,
  namedInBody: string | undefined,
  ...actions: string[]
): Promise<{ key: ApiKeyRecord; workspace: WorkspaceRecord | null } | GatewayError> {
  const found = await visibleKey(request, namedInBody)
  if (found instanceof GatewayError) return found
  const { deps, principal } = request
  if (!hasKeyScope(principal, found.key.type, ...actions)) {
    return gatewayError(ERRORS.GW_SCOPE_MISSING, `You do not have enough permissions to execute this request: needs ${actions.map((action) => `${keyScopeResource(found.key.type)}.${action}`).join(' or ')}`)
  }
  if (!isAdminKey(principal) && (found.workspace === null || !(await canManage(deps, principal, found.workspace)))) {
    return forbidden('Only workspace admins and managers can change API keys')
  }
  const refused = await mayActOn(deps, principal, found.key, found.workspace)
  return refused ?? found
}

/** The budget state of the key's usage limit (see `budgetUsage`). */
function keyUsage(deps: AdminDeps, key: ApiKeyRecord): Promise<readonly BudgetUsage[] | undefined> {
  return budgetUsage(deps, { kind: 'api-key', id: key.id }, key.workspaceId ?? key.organisationId, key.usageLimits === null ? [] : [key.usageLimits])
}

/** Maps workspace UUIDs to slugs for one response (each looked up once). */
function slugResolver(deps: AdminDeps, organisationId: string): (workspaceId: string | null) => Promise<string | null> {
  const slugs = new Map<string, string>()
  return async (workspaceId) => {
    if (workspaceId === null) return null
    const known = slugs.get(workspaceId)
    if (known !== undefined) return known
    const workspace = await deps.store.findWorkspace(organisationId, workspaceId)
    const slug = workspace?.slug ?? workspaceId
    slugs.set(workspaceId, slug)
    return slug
  }
}

function createApiKey(type: ApiKeyType): Handler {
  return async (request) => {
    const body = parseBody(request.ctx, createApiKeyBody)
    if (!body.ok) return body.error
    const { deps, principal, ctx } = request
    const input = body.value
    if (input.organisation_id !== undefined && input.organisation_id !== principal.organisationId) return notFound('Organisation')

    let workspace: WorkspaceRecord | null = null
    if (type === 'organisation-service') {
      if (input.workspace_id !== undefined) return invalid('workspace_id: not allowed for organisation keys', 'workspace_id')
      if (input.user_id !== undefined) return invalid('user_id: not allowed for service keys', 'user_id')
    } else {
      const target = await targetWorkspace(deps, principal, input.workspace_id)
      if (!target.ok) return target.missing ? invalid('workspace_id: required for workspace keys', 'workspace_id') : notFound('Workspace')
      workspace = target.workspace
      noteAction(ctx, { workspaceId: workspace.id })
      if (!(await canManage(deps, principal, workspace))) return forbidden('Only workspace admins and managers can create API keys')
      if (type === 'workspace-user') {
        if (input.user_id === undefined) return invalid('user_id: required for user keys', 'user_id')
        const user = await deps.store.findUser(principal.organisationId, input.user_id)
        if (user === null) return notFound('User')
        const orgWide = user.role === 'owner' || user.role === 'admin'
        if (!orgWide && (await deps.store.findMember(workspace.id, user.id)) === null) {
          return invalid('user_id: the user is not a member of this workspace', 'user_id')
        }
        const refused = await outranked(deps, principal, workspace, user.id)
        if (refused !== null) return refused
      } else if (input.user_id !== undefined) {
        return invalid('user_id: not allowed for service keys', 'user_id')
      }
    }
    const scopes = grantableScopes(principal, type, input.scopes)
    if (scopes instanceof GatewayError) return scopes
    const defaults = await checkedDefaults(deps, principal, input.defaults, workspace?.id ?? null)
    if (defaults instanceof GatewayError) return defaults

    const { secret, record: key } = issueApiKey({
      name: input.name,
      description: input.description ?? null,
      type,
      organisationId: principal.organisationId,
      workspaceId: workspace?.id ?? null,
      userId: input.user_id ?? null,
      scopes,
      expiresAt: input.expires_at ?? null,
      creationMode: 'api',
      rateLimits: rateLimitsOf(input.rate_limits),
      usageLimits: input.usage_limits == null ? null : usageLimitOf(input.usage_limits),
      defaults,
      alertEmails: input.alert_emails ?? [],
      createdAt: nowIso(deps),
    })
    noteAction(ctx, { resourceId: key.id })
    await commit(request, 200, (writer) => writer.insertApiKey(key))
    // Another instance may have remembered this hash as unknown.
    deps.notifier.publish(CHANGE_CHANNELS.apiKeys, key.keyHash)
    return jsonReply(200, { id: key.id, key: secret, object: 'api-key' })
  }
}

async function listApiKeys(request: AdminRequest): Promise<Reply | GatewayError> {
  const query = parseQuery(request.ctx, listApiKeysQuery)
  if (!query.ok) return query.error
  const { deps, principal } = request
  const { current_page, page_size, workspace_id } = query.value
  let workspaceId: string | undefined
  if (workspace_id !== undefined || principal.workspaceId !== null) {
    const workspace = await visibleWorkspace(deps, principal, workspace_id ?? principal.workspaceId ?? undefined)
    if (workspace === null) return notFound('Workspace')
    workspaceId = workspace.id
  }
  // Only the key types the caller may list.
  const types = KEY_TYPES.filter((type) => hasKeyScope(principal, type, 'list'))
  const page = await deps.store.listApiKeys(principal.organisationId, { types, ...(workspaceId === undefined ? {} : { workspaceId }) }, pageOf(current_page, page_size))
  const slugOf = slugResolver(deps, principal.organisationId)
  const now = deps.clock.now()
  const data = []
  for (const key of page.items) data.push(apiKeyView(key, await slugOf(key.workspaceId), now, await keyUsage(deps, key)))
  return jsonReply(200, listView(page.total, data))
}

async function getApiKey(request: AdminRequest): Promise<Reply | GatewayError> {
  const found = await visibleKey(request, undefined)
  if (found instanceof GatewayError) return found
  if (!hasKeyScope(request.principal, found.key.type, 'read')) return gatewayError(ERRORS.GW_SCOPE_MISSING)
  return jsonReply(200, apiKeyView(found.key, found.workspace?.slug ?? found.key.workspaceId, request.deps.clock.now(), await keyUsage(request.deps, found.key)))
}

async function updateApiKey(request: AdminRequest): Promise<Reply | GatewayError> {
  const body = parseBody(request.ctx, updateApiKeyBody)
  if (!body.ok) return body.error
  const found = await changeableKey(request, body.value.workspace_id, 'update')
  if (found instanceof GatewayError) return found
  const { deps, principal } = request
  const { key } = found
  const input = body.value
  let scopes = key.scopes
  if (input.scopes !== undefined) {
    const granted = grantableScopes(principal, key.type, input.scopes)
    if (granted instanceof GatewayError) return granted
    scopes = granted
  }
  let defaults = key.defaults
  if (input.defaults !== undefined) {
    const checked = await checkedDefaults(deps, principal, input.defaults, key.workspaceId)
    if (checked instanceof GatewayError) return checked
    defaults = checked
  }
  const updated: ApiKeyRecord = {
    ...key,
    name: input.name ?? key.name,
    description: input.description === undefined ? key.description : input.description,
    scopes,
    rateLimits: input.rate_limits === undefined ? key.rateLimits : rateLimitsOf(input.rate_limits),
    usageLimits: input.usage_limits === undefined ? key.usageLimits : input.usage_limits === null ? null : usageLimitOf(input.usage_limits),
    defaults,
    alertEmails: input.alert_emails === undefined ? key.alertEmails : (input.alert_emails ?? []),
    expiresAt: input.expires_at === undefined ? key.expiresAt : input.expires_at,
    // `reset_usage` puts an exhausted key back to work (its budgets start a new period below).
    status: input.reset_usage === true && key.status === 'exhausted' ? 'active' : key.status,
    lastUpdatedAt: nowIso(deps, key.lastUpdatedAt),
  }
  await commit(request, 200, (writer) => writer.updateApiKey(updated, key.lastUpdatedAt).then(requireApplied))
  publishKeyChanges(deps, [updated])
  if (input.reset_usage === true) await deps.budgets.reset({ kind: 'api-key', id: key.id })
  return jsonReply(200, apiKeyView(updated, found.workspace?.slug ?? key.workspaceId, deps.clock.now(), await keyUsage(deps, updated)))
}

async function deleteApiKey(request: AdminRequest): Promise<Reply | GatewayError> {
  const body = parseBody(request.ctx, workspaceIdBody)
  if (!body.ok) return body.error
  const found = await changeableKey(request, body.value.workspace_id, 'delete')
  if (found instanceof GatewayError) return found
  const { deps, principal } = request
  const deleted = await commit(request, 200, (writer) => writer.deleteApiKey(principal.organisationId, found.key.id))
  publishKeyChanges(deps, deleted === null ? [found.key] : [deleted])
  return jsonReply(200, {})
}

async function rotateApiKey(request: AdminRequest): Promise<Reply | GatewayError> {
  const body = parseBody(request.ctx, rotateApiKeyBody)
  if (!body.ok) return body.error
  const found = await changeableKey(request, body.value.workspace_id, 'rotate', 'update')
  if (found instanceof GatewayError) return found
  const { deps } = request
  const { key } = found
  const nowMs = deps.clock.now()
  if (key.previousKeyExpiresAt !== null && Date.parse(key.previousKeyExpiresAt) > nowMs) {
    return gatewayError(ERRORS.GW_ADMIN_CONFLICT, `The previous rotation is still in transition until ${key.previousKeyExpiresAt}; rotate again after that`)
  }
  const secret = newApiKeySecret()
  const now = nowIso(deps, key.lastUpdatedAt)
  const transitionEnds = new Date(Date.parse(now) + (body.value.key_transition_period_ms ?? MIN_KEY_TRANSITION_MS)).toISOString()
  const rotated: ApiKeyRecord = {
    ...key,
    keyHash: hashSecret(secret),
    maskedKey: maskSecret(secret),
    previousKeyHash: key.keyHash,
    previousKeyExpiresAt: transitionEnds,
    lastRotatedAt: now,
    lastUpdatedAt: now,
  }
  await commit(request, 200, (writer) => writer.updateApiKey(rotated, key.lastUpdatedAt).then(requireApplied))
  // The old secret's cached entry must learn its deadline; the new hash may be cached as unknown.
  publishKeyChanges(deps, [rotated])
  return jsonReply(200, { id: key.id, key: secret, key_transition_expires_at: transitionEnds, object: 'api-key' })
}

export const apiKeyHandlers: HandlerMap = {
  'api-keys.organisation-service.create': createApiKey('organisation-service'),
  'api-keys.workspace-service.create': createApiKey('workspace-service'),
  'api-keys.workspace-user.create': createApiKey('workspace-user'),
  'api-keys.list': listApiKeys,
  'api-keys.get': getApiKey,
  'api-keys.update': updateApiKey,
  'api-keys.delete': deleteApiKey,
  'api-keys.rotate': rotateApiKey,
}
