/**
 * Invitations (`/v1/admin/users/invites…`, API.md §5) and the invite link itself
 * (`GET/POST /v1/invites/:token`, public: the token is the secret).
 *
 * The token is 32 random bytes shown once, in the link; only its hash is stored, so a leaked store
 * does not leak usable links. Accepting creates the user, their memberships and their workspace
 * user keys, and marks the invite accepted, in one transaction that first claims the invite: of
 * two concurrent accepts exactly one wins, the other sees 410 and nothing of it is kept.
 */
import { randomBytes, randomUUID } from 'node:crypto'
import type { ApiKeyRecord, InviteRecord, UserRecord, WorkspaceMemberRecord } from '../../core/admin-records.js'
import { CHANGE_CHANNELS } from '../../core/channels.js'
import { ERRORS, gatewayError, GatewayError, isGatewayError } from '../../core/errors.js'
import { jsonReply, type Reply } from '../../core/plugin.js'
import { normaliseScope, WORKSPACE_KEY_SCOPES } from '../../core/scopes.js'
import { hashSecret, issueApiKey } from '../../core/secrets.js'
import { uncoveredScope } from './access.js'
import { hashPassword } from './password.js'
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
  type PublicRequest,
  type HandlerMap,
  type PublicHandlerMap,
} from './request.js'
import { acceptInviteBody, createInviteBody, listInvitesQuery } from './schemas.js'
import { workspaceSlugs } from './users.js'
import { inviteStatus, inviteView, listView, userView } from './views.js'

const TOKEN_BYTES = 32

function newInviteToken(): { token: string; tokenHash: string } {
  const token = randomBytes(TOKEN_BYTES).toString('base64url')
  return { token, tokenHash: hashSecret(token) }
}

function inviteLink(deps: AdminDeps, token: string): string {
  return `${deps.config.publicUrl.replace(/\/+$/, '')}/v1/invites/${token}`
}

function expiryFrom(deps: AdminDeps, now: string): string {
  return new Date(Date.parse(now) + deps.config.inviteTtlMs).toISOString()
}

function conflict(message: string): GatewayError {
  return gatewayError(ERRORS.GW_ADMIN_CONFLICT, message)
}

/** 410 for an invite that can no longer be accepted, `null` while it can. */
function goneError(invite: InviteRecord, nowMs: number): GatewayError | null {
  switch (inviteStatus(invite, nowMs)) {
    case 'accepted':
      return gatewayError(ERRORS.GW_ADMIN_GONE, 'This invite was already used')
    case 'cancelled':
      return gatewayError(ERRORS.GW_ADMIN_GONE, 'This invite was cancelled')
    case 'expired':
      return gatewayError(ERRORS.GW_ADMIN_GONE, 'This invite has expired')
    case 'pending':
      return null
  }
}

/** 410 for an invite an admin can no longer cancel or resend (accepted or cancelled; expired ones can be). */
function settledError(invite: InviteRecord): GatewayError | null {
  if (invite.state === 'accepted') return gatewayError(ERRORS.GW_ADMIN_GONE, 'This invite was already accepted')
  if (invite.state === 'cancelled') return gatewayError(ERRORS.GW_ADMIN_GONE, 'This invite was cancelled')
  return null
}

/**
 * Runs an optimistic change of `invite` (expected still `pending`); `null` when it applied. When
 * another request settled the invite first, the lost race is reported the way a later request
 * would see it (410), not as a generic conflict.
 */
async function settleRace(deps: AdminDeps, invite: InviteRecord, describe: (current: InviteRecord) => GatewayError | null, change: () => Promise<unknown>): Promise<GatewayError | null> {
  try {
    await change()
    return null
  } catch (error) {
    if (!isGatewayError(error) || (error.code !== ERRORS.GW_ADMIN_STALE.code && error.code !== ERRORS.GW_ADMIN_CONFLICT.code)) throw error
    const current = await deps.store.findInvite(invite.organisationId, invite.id)
    const gone = current === null ? gatewayError(ERRORS.GW_ADMIN_GONE, 'This invite no longer exists') : describe(current)
    if (gone === null) throw error
    return gone
  }
}

/** Invite views with workspace slugs, resolved once per workspace. */
async function inviteViews(deps: AdminDeps, organisationId: string, invites: readonly InviteRecord[], nowMs: number): Promise<Array<Record<string, unknown>>> {
  const slugOf = workspaceSlugs(deps, organisationId)
  const ids = [...new Set(invites.flatMap((invite) => invite.workspaces.map((entry) => entry.workspaceId)))]
  const slugs = new Map(await Promise.all(ids.map(async (id) => [id, await slugOf(id)] as const)))
  return invites.map((invite) => inviteView(invite, nowMs, (id) => slugs.get(id) ?? id))
}

/** The invite of the path, or 404. */
async function pathInvite(request: AdminRequest): Promise<InviteRecord | GatewayError> {
  const inviteId = request.ctx.params.inviteId ?? ''
  noteAction(request.ctx, { resourceId: inviteId })
  const invite = await request.deps.store.findInvite(request.principal.organisationId, inviteId)
  return invite ?? notFound('Invite')
}

/** Requested key scopes, normalised and de-duplicated; each must be a workspace key scope. */
function keyScopesOf(requested: readonly string[] | undefined): { ok: true; scopes: string[] | null } | { ok: false; error: GatewayError } {
  if (requested === undefined) return { ok: true, scopes: null }
  const scopes: string[] = []
  for (const [index, raw] of requested.entries()) {
    const scope = normaliseScope(raw)
    if (!WORKSPACE_KEY_SCOPES.includes(scope)) {
      return { ok: false, error: invalid(`workspace_api_key_details.scopes.${index}: "${raw}" is not a workspace API key scope`, 'workspace_api_key_details.scopes') }
    }
    if (!scopes.includes(scope)) scopes.push(scope)
  }
  return { ok: true, scopes }
}

async function createInvite(request: AdminRequest): Promise<Reply | GatewayError> {
  const body = parseBody(request.ctx, createInviteBody)
  if (!body.ok) return body.error
  const { deps, principal } = request
  const input = body.value
  const keyScopes = keyScopesOf(input.workspace_api_key_details?.scopes)
  if (!keyScopes.ok) return keyScopes.error
  // The invited user's keys are keys this caller mints: the same rule as creating them directly.
  const beyond = keyScopes.scopes === null ? undefined : uncoveredScope(principal, 'workspace-user', keyScopes.scopes)
  if (beyond !== undefined) return forbidden(`workspace_api_key_details.scopes: you cannot grant "${beyond}", which your own key does not hold`)
  const workspaces: Array<InviteRecord['workspaces'][number]> = []
  for (const [index, entry] of input.workspaces.entries()) {
    const workspace = await deps.store.findWorkspace(principal.organisationId, entry.id)
    if (workspace === null) return notFound(`Workspace ${entry.id}`)
    if (workspaces.some((known) => known.workspaceId === workspace.id)) return invalid(`workspaces.${index}.id: workspace listed twice`, 'workspaces')
    workspaces.push({ workspaceId: workspace.id, role: entry.role })
  }
  if ((await deps.store.findUserByEmail(principal.organisationId, input.email)) !== null) {
    return conflict(`email: ${input.email} is already a user of this organisation`)
  }
  const now = nowIso(deps)
  const pending = await deps.store.listInvites(principal.organisationId, { email: input.email, status: 'pending' }, { offset: 0, limit: 1 }, now)
  if (pending.total > 0) return conflict(`email: ${input.email} already has a pending invite (resend or cancel it)`)
  const { token, tokenHash } = newInviteToken()
  const invite: InviteRecord = {
    id: randomUUID(),
    organisationId: principal.organisationId,
    tokenHash,
    email: input.email,
    role: input.role,
    workspaces,
    apiKeyScopes: keyScopes.scopes,
    invitedBy: principal.userId,
    state: 'pending',
    createdAt: now,
    expiresAt: expiryFrom(deps, now),
    acceptedAt: null,
    lastUpdatedAt: now,
  }
  noteAction(request.ctx, { resourceId: invite.id })
  await commit(request, 200, (writer) => writer.insertInvite(invite))
  return jsonReply(200, { id: invite.id, invite_link: inviteLink(deps, token), object: 'invite' })
}

async function listInvites(request: AdminRequest): Promise<Reply | GatewayError> {
  const query = parseQuery(request.ctx, listInvitesQuery)
  if (!query.ok) return query.error
  const { deps, principal } = request
  const { currentPage, pageSize, role, email, status } = query.value
  const now = nowIso(deps)
  const page = await deps.store.listInvites(
    principal.organisationId,
    { ...(role === undefined ? {} : { role }), ...(email === undefined ? {} : { email }), ...(status === undefined ? {} : { status }) },
    pageOf(currentPage, pageSize),
    now,
  )
  return jsonReply(200, listView(page.total, await inviteViews(deps, principal.organisationId, page.items, Date.parse(now))))
}

async function getInvite(request: AdminRequest): Promise<Reply | GatewayError> {
  const invite = await pathInvite(request)
  if (invite instanceof GatewayError) return invite
  const [view] = await inviteViews(request.deps, invite.organisationId, [invite], request.deps.clock.now())
  return jsonReply(200, view)
}

async function deleteInvite(request: AdminRequest): Promise<Reply | GatewayError> {
  const invite = await pathInvite(request)
  if (invite instanceof GatewayError) return invite
  const settled = settledError(invite)
  if (settled !== null) return settled
  const { deps } = request
  const cancelled: InviteRecord = { ...invite, state: 'cancelled', lastUpdatedAt: nowIso(deps, invite.lastUpdatedAt) }
  const lost = await settleRace(deps, invite, settledError, () => commit(request, 200, (writer) => writer.updateInvite(cancelled, 'pending').then(requireApplied)))
  return lost ?? jsonReply(200, {})
}

async function resendInvite(request: AdminRequest): Promise<Reply | GatewayError> {
  const invite = await pathInvite(request)
  if (invite instanceof GatewayError) return invite
  const settled = settledError(invite)
  if (settled !== null) return settled
  const { deps, principal } = request
  // The new link goes to this caller: it must be one who could have made the invite itself.
  const beyond = invite.apiKeyScopes === null ? undefined : uncoveredScope(principal, 'workspace-user', invite.apiKeyScopes)
  if (beyond !== undefined) return forbidden(`This invite grants "${beyond}", which your own key does not hold: you cannot resend it`)
  // A new token replaces the old hash, so the previous link stops working.
  const { token, tokenHash } = newInviteToken()
  const now = nowIso(deps, invite.lastUpdatedAt)
  const renewed: InviteRecord = { ...invite, tokenHash, expiresAt: expiryFrom(deps, now), lastUpdatedAt: now }
  const lost = await settleRace(deps, invite, settledError, () => commit(request, 200, (writer) => writer.updateInvite(renewed, 'pending').then(requireApplied)))
  // camelCase, as the reference API answers.
  return lost ?? jsonReply(200, { inviteLink: inviteLink(deps, token) })
}

/** The invite of a link's token, or 404 (an unknown and a replaced token look the same). */
async function tokenInvite(request: PublicRequest): Promise<InviteRecord | GatewayError> {
  const token = request.ctx.params.token ?? ''
  const invite = token.length === 0 ? null : await request.deps.store.findInviteByTokenHash(hashSecret(token))
  return invite ?? notFound('Invite')
}

async function showInvite(request: PublicRequest): Promise<Reply | GatewayError> {
  const invite = await tokenInvite(request)
  if (invite instanceof GatewayError) return invite
  const [view] = await inviteViews(request.deps, invite.organisationId, [invite], request.deps.clock.now())
  return jsonReply(200, view)
}

async function acceptInvite(request: PublicRequest): Promise<Reply | GatewayError> {
  const body = parseBody(request.ctx, acceptInviteBody)
  if (!body.ok) return body.error
  const { ctx, deps } = request
  const invite = await tokenInvite(request)
  if (invite instanceof GatewayError) return invite
  // No principal: the audit entry is filed under the invite's organisation (and, once the
  // user exists, attributed to them).
  noteAction(ctx, { organisationId: invite.organisationId, resourceId: invite.id })
  const now = nowIso(deps)
  const gone = goneError(invite, Date.parse(now))
  if (gone !== null) return gone
  const organisationId = invite.organisationId
  if ((await deps.store.findUserByEmail(organisationId, invite.email)) !== null) {
    return conflict(`email: ${invite.email} is already a user of this organisation`)
  }
  const userId = randomUUID()
  const user: UserRecord = {
    id: userId,
    organisationId,
    email: invite.email,
    firstName: body.value.first_name,
    lastName: body.value.last_name,
    role: invite.role,
    passwordHash: await hashPassword(body.value.password),
    createdAt: now,
    lastUpdatedAt: now,
  }
  // A workspace deleted since the invite was sent is skipped, not an error: the rest still applies.
  const members: Array<{ member: WorkspaceMemberRecord; slug: string }> = []
  for (const entry of invite.workspaces) {
    const workspace = await deps.store.findWorkspace(organisationId, entry.workspaceId)
    if (workspace === null) continue
    members.push({ slug: workspace.slug, member: { workspaceId: workspace.id, userId, organisationId, role: entry.role, createdAt: now, lastUpdatedAt: now } })
  }
  const keys: Array<{ record: ApiKeyRecord; secret: string; slug: string }> = []
  if (invite.apiKeyScopes !== null) {
    for (const { member, slug } of members) {
      const issued = issueApiKey({
        name: `Invite key for ${invite.email}`,
        description: null,
        type: 'workspace-user',
        organisationId: invite.organisationId,
        workspaceId: member.workspaceId,
        userId: member.userId,
        scopes: invite.apiKeyScopes ?? [],
        expiresAt: null,
        creationMode: 'auto',
        createdAt: now,
      })
      keys.push({ secret: issued.secret, slug, record: issued.record })
    }
  }
  const accepted: InviteRecord = { ...invite, state: 'accepted', acceptedAt: now, lastUpdatedAt: nowIso(deps, invite.lastUpdatedAt) }
  noteAction(ctx, { userId })
  let lost: GatewayError | null
  try {
    lost = await settleRace(
      deps,
      invite,
      (current) => goneError(current, deps.clock.now()),
      () =>
        commit(request, 201, async (writer) => {
          // Claimed first, so a concurrent accept that lost fails here before it writes anything.
          requireApplied(await writer.updateInvite(accepted, 'pending'))
          await writer.insertUser(user)
          for (const { member } of members) await writer.insertMember(member)
          for (const { record } of keys) await writer.insertApiKey(record)
        }),
    )
  } catch (error) {
    noteAction(ctx, { userId: null })
    throw error
  }
  if (lost !== null) {
    // The user was not created: the refusal is nobody's action.
    noteAction(ctx, { userId: null })
    return lost
  }
  // An instance may have cached these hashes as unknown keys.
  for (const { record } of keys) deps.notifier.publish(CHANGE_CHANNELS.apiKeys, record.keyHash)
  return jsonReply(201, {
    user: userView(user, members.map((entry) => entry.slug)),
    api_keys: keys.map((key) => ({ workspace_id: key.slug, id: key.record.id, key: key.secret })),
  })
}

export const inviteHandlers: HandlerMap = {
  'admin.invites.create': createInvite,
  'admin.invites.list': listInvites,
  'admin.invites.get': getInvite,
  'admin.invites.delete': deleteInvite,
  'admin.invites.resend': resendInvite,
}

export const publicInviteHandlers: PublicHandlerMap = {
  'invites.show': showInvite,
  'invites.accept': acceptInvite,
}
