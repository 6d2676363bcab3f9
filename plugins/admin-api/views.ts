/**
 * Admin store records → Admin API response objects (snake_case, `object` discriminators). Secrets
 * never appear: API keys show their masked form, invites never show their token.
 */
import type {
  ApiKeyRecord,
  InviteRecord,
  InviteStatus,
  OrganisationRecord,
  RateLimitRule,
  RequestDefaults,
  UsageLimitRule,
  UserRecord,
  WorkspaceMemberWithUser,
  WorkspaceRecord,
  WorkspaceRole,
} from '../../core/admin-records.js'
import type { BudgetUsage } from '../../core/budgets.js'
import { WORKSPACE_KEY_SCOPES } from '../../core/scopes.js'

export function organisationView(organisation: OrganisationRecord): Record<string, unknown> {
  return {
    object: 'organisation',
    id: organisation.id,
    name: organisation.name,
    created_at: organisation.createdAt,
    jwt_configured: organisation.jwt !== null,
  }
}

export function jwtSettingsView(organisation: OrganisationRecord): Record<string, unknown> {
  const jwt = organisation.jwt
  return {
    object: 'jwt-settings',
    organisation_id: organisation.id,
    jwks_url: jwt?.jwksUrl ?? null,
    jwks: jwt?.jwks ?? null,
    issuer: jwt?.issuer ?? null,
    audience: jwt?.audience ?? null,
    updated_at: jwt?.updatedAt ?? null,
  }
}

export function rateLimitsView(rules: readonly RateLimitRule[]): Array<Record<string, unknown>> {
  return rules.map((rule) => ({ type: rule.type, unit: rule.unit, value: rule.value }))
}

/**
 * A `usage_limits` entry; with its budget state (`BudgetAccounts.usage`) it also carries
 * `current_usage` (USD or tokens, current period), `last_reset_at` and `status` (`exhausted` once
 * used up).
 */
export function usageLimitView(rule: UsageLimitRule, usage?: BudgetUsage): Record<string, unknown> {
  const view: Record<string, unknown> = {
    type: rule.type,
    credit_limit: rule.creditLimit,
    alert_threshold: rule.alertThreshold,
    periodic_reset: rule.periodicReset,
    periodic_reset_days: rule.periodicResetDays,
  }
  if (usage === undefined) return view
  return { ...view, current_usage: usage.currentUsage, last_reset_at: usage.lastResetAt, status: usage.exhausted ? 'exhausted' : 'active' }
}

export function defaultsView(defaults: RequestDefaults | null): Record<string, unknown> | null {
  return defaults === null ? null : { metadata: defaults.metadata, config_id: defaults.configId }
}

/** A workspace's public id is its slug; its UUID is accepted wherever an id is. */
export function workspaceView(workspace: WorkspaceRecord, usage?: readonly BudgetUsage[]): Record<string, unknown> {
  return {
    object: 'workspace',
    id: workspace.slug,
    slug: workspace.slug,
    name: workspace.name,
    description: workspace.description,
    created_at: workspace.createdAt,
    last_updated_at: workspace.lastUpdatedAt,
    defaults: defaultsView(workspace.defaults),
    usage_limits: workspace.usageLimits.map((rule, index) => usageLimitView(rule, usage?.[index])),
    rate_limits: rateLimitsView(workspace.rateLimits),
  }
}

const READ_ACTIONS = new Set(['read', 'list', 'view'])

/** The workspace scopes a role grants: managers and admins all, members read-only plus completions. */
export function scopesOfRole(role: WorkspaceRole): readonly string[] {
  if (role !== 'member') return WORKSPACE_KEY_SCOPES
  return WORKSPACE_KEY_SCOPES.filter((scope) => scope === 'completions.write' || READ_ACTIONS.has(scope.slice(scope.lastIndexOf('.') + 1)))
}

export function memberView(entry: WorkspaceMemberWithUser, workspace: WorkspaceRecord): Record<string, unknown> {
  const { member, user } = entry
  return {
    object: 'workspace-user',
    id: user.id,
    first_name: user.firstName,
    last_name: user.lastName,
    email: user.email,
    org_role: user.role,
    role: member.role,
    status: 'active',
    workspace_id: workspace.slug,
    created_at: member.createdAt,
    last_updated_at: member.lastUpdatedAt,
    scopes: scopesOfRole(member.role),
    settings: null,
  }
}

export function userView(user: UserRecord, workspaceSlugs: readonly string[]): Record<string, unknown> {
  return {
    object: 'user',
    id: user.id,
    first_name: user.firstName,
    last_name: user.lastName,
    email: user.email,
    role: user.role,
    created_at: user.createdAt,
    last_updated_at: user.lastUpdatedAt,
    workspace_ids: workspaceSlugs,
  }
}

/** `expired` is derived: a pending invite past its expiry. */
export function inviteStatus(invite: InviteRecord, nowMs: number): InviteStatus {
  return invite.state === 'pending' && Date.parse(invite.expiresAt) <= nowMs ? 'expired' : invite.state
}

/** `slugOf` maps workspace UUIDs to slugs (a deleted workspace shows its UUID). */
export function inviteView(invite: InviteRecord, nowMs: number, slugOf: (workspaceId: string) => string): Record<string, unknown> {
  return {
    object: 'invite',
    id: invite.id,
    email: invite.email,
    role: invite.role,
    status: inviteStatus(invite, nowMs),
    created_at: invite.createdAt,
    expires_at: invite.expiresAt,
    accepted_at: invite.acceptedAt,
    invited_by: invite.invitedBy,
    workspaces: invite.workspaces.map((entry) => ({ workspace_id: slugOf(entry.workspaceId), role: entry.role })),
    workspace_api_key_details: invite.apiKeyScopes === null ? null : { scopes: invite.apiKeyScopes },
  }
}

/**
 * `workspaceSlug`: the key's workspace slug (`null` for organisation keys); `usage`: the budget
 * state of its usage limit, which makes the key `exhausted` once used up.
 */
export function apiKeyView(key: ApiKeyRecord, workspaceSlug: string | null, nowMs: number, usage?: readonly BudgetUsage[]): Record<string, unknown> {
  const inTransition = key.previousKeyExpiresAt !== null && Date.parse(key.previousKeyExpiresAt) > nowMs
  const expired = key.expiresAt !== null && Date.parse(key.expiresAt) <= nowMs
  return {
    object: 'api-key',
    id: key.id,
    key: key.maskedKey,
    name: key.name,
    description: key.description,
    type: key.type,
    organisation_id: key.organisationId,
    workspace_id: workspaceSlug,
    user_id: key.userId,
    status: expired ? 'expired' : usage?.[0]?.exhausted === true ? 'exhausted' : key.status,
    created_at: key.createdAt,
    last_updated_at: key.lastUpdatedAt,
    creation_mode: key.creationMode,
    scopes: key.scopes,
    rate_limits: rateLimitsView(key.rateLimits),
    usage_limits: key.usageLimits === null ? null : usageLimitView(key.usageLimits, usage?.[0]),
    defaults: defaultsView(key.defaults),
    alert_emails: key.alertEmails,
    expires_at: key.expiresAt,
    last_rotated_at: key.lastRotatedAt,
    key_transition_expires_at: inTransition ? key.previousKeyExpiresAt : null,
  }
}

/** The list envelope (API.md §5). */
export function listView(total: number, data: readonly unknown[]): Record<string, unknown> {
  return { object: 'list', total, data }
}
