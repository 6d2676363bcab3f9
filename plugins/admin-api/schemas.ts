/**
 * Request schemas of the Admin API (zod). The handlers validate bodies and queries with them, and
 * the OpenAPI document is generated from the same objects, so the two cannot drift. Failures are
 * reported as `field: message` (AB01).
 */
import { z } from 'zod'

// ---------------------------------------------------------------------------------------------
// Shared pieces

export const isoDateTime = z.string().datetime({ offset: true })

const futureDate = isoDateTime.refine((value) => Date.parse(value) > Date.now(), 'must be in the future')

const name = z.string().trim().min(1).max(200)
const description = z.string().max(2000).nullable()
const email = z.string().trim().toLowerCase().pipe(z.email().max(320))

export const organisationRoleInput = z.enum(['admin', 'member'])
export const workspaceRole = z.enum(['admin', 'manager', 'member'])

export const rateLimitRule = z
  .object({
    type: z.enum(['requests', 'tokens']),
    unit: z.enum(['rps', 'rpm', 'rph', 'rpd', 'rpw']),
    value: z.number().int().min(0),
  })
  .strict()

export const usageLimitRule = z
  .object({
    type: z.enum(['cost', 'tokens']).default('cost'),
    credit_limit: z.number().min(0),
    alert_threshold: z.number().min(0).nullable().optional(),
    periodic_reset: z.enum(['weekly', 'monthly']).nullable().optional(),
    periodic_reset_days: z.number().int().min(1).max(365).nullable().optional(),
  })
  .strict()

const metadata = z.record(z.string().max(128), z.string().max(1024))

/**
 * `workspace_id` (slug or UUID) as any Admin API call may send it (API.md §1: query on reads, body on
 * writes, either on DELETE). On a route whose path names the resource it is a check, not a selector:
 * it must name the resource's workspace, else 404 (access.ts `checkNamedWorkspace`).
 */
export const workspaceIdField = z
  .string()
  .min(1)
  .max(200)
  .describe("Workspace slug or UUID. On a resource's own path it must name the workspace the resource lives in (else 404)")

/** `workspace_id` in the query string (reads, and DELETE), checked by `checkNamedWorkspace`. */
export const workspaceIdQuery = z.object({ workspace_id: workspaceIdField.optional() })

/** The body of a route that takes nothing but `workspace_id` (DELETE, rotate-like actions). */
export const workspaceIdBody = z.object({ workspace_id: workspaceIdField.optional() }).strict()

export const requestDefaults = z
  .object({
    metadata: metadata.nullable().optional(),
    config_id: z.string().min(1).max(200).nullable().optional(),
  })
  .strict()

// ---------------------------------------------------------------------------------------------
// Paging and list queries

const pageNumber = z.coerce.number().int().min(0).max(1_000_000)
const pageSize = z.coerce.number().int().min(1).max(1000)

/** `current_page` (0-based) and `page_size` (default 50). */
export const snakePaging = { current_page: pageNumber.default(0), page_size: pageSize.default(50) }
/** `currentPage` / `pageSize`: the users and invites lists use camelCase (API.md §5). */
export const camelPaging = { currentPage: pageNumber.default(0), pageSize: pageSize.default(50) }

// ---------------------------------------------------------------------------------------------
// Organisation

const jwtAudience = z.string().min(1).max(2048)

export const jwtSettingsBody = z
  .object({
    jwks_url: z.url({ protocol: /^https?$/ }).max(2048).optional(),
    jwks: z
      .object({ keys: z.array(z.record(z.string(), z.unknown())).min(1).max(100) })
      .strict()
      .optional(),
    /** Tokens must carry this `iss`; omitted or null: any issuer. */
    issuer: z.string().min(1).max(2048).nullable().optional(),
    /** A token's `aud` must contain this (or one of these); omitted or null: any audience. */
    audience: z.union([jwtAudience, z.array(jwtAudience).min(1).max(20)]).nullable().optional(),
  })
  .strict()
  .refine((body) => (body.jwks_url === undefined) !== (body.jwks === undefined), 'send exactly one of jwks_url and jwks')

// ---------------------------------------------------------------------------------------------
// Workspaces and members

export const createWorkspaceBody = z
  .object({
    name,
    description: description.optional(),
    defaults: requestDefaults.nullable().optional(),
    users: z.array(z.string().min(1)).max(1000).optional(),
    usage_limits: z.array(usageLimitRule).max(10).nullable().optional(),
    rate_limits: z.array(rateLimitRule).max(10).nullable().optional(),
  })
  .strict()

export const updateWorkspaceBody = z
  .object({
    workspace_id: workspaceIdField.optional(),
    name: name.optional(),
    description: description.optional(),
    defaults: requestDefaults.nullable().optional(),
    usage_limits: z.array(usageLimitRule).max(10).nullable().optional(),
    rate_limits: z.array(rateLimitRule).max(10).nullable().optional(),
  })
  .strict()

export const deleteWorkspaceBody = z
  .object({
    workspace_id: workspaceIdField.optional(),
    name: z.string().optional(),
    force_delete: z.boolean().optional(),
  })
  .strict()

export const listWorkspacesQuery = z.object({
  ...snakePaging,
  name: z.string().max(200).optional(),
  exact_name: z.string().max(200).optional(),
})

export const deleteWorkspaceQuery = z.object({
  force_delete: z.enum(['true', 'false']).optional(),
  workspace_id: workspaceIdField.optional(),
})

export const addMembersBody = z
  .object({
    workspace_id: workspaceIdField.optional(),
    users: z
      .array(z.object({ id: z.string().min(1), role: workspaceRole.default('member') }).strict())
      .min(1)
      .max(1000),
  })
  .strict()

export const updateMemberBody = z.object({ workspace_id: workspaceIdField.optional(), role: workspaceRole }).strict()

export const listMembersQuery = z.object({
  ...snakePaging,
  workspace_id: workspaceIdField.optional(),
  role: workspaceRole.optional(),
  email: z.string().trim().toLowerCase().max(320).optional(),
})

// ---------------------------------------------------------------------------------------------
// API keys

export const createApiKeyBody = z
  .object({
    name,
    description: description.optional(),
    organisation_id: z.string().optional(),
    workspace_id: z.string().min(1).optional(),
    user_id: z.string().min(1).optional(),
    scopes: z.array(z.string().min(1)).min(1).max(200),
    rate_limits: z.array(rateLimitRule).max(10).nullable().optional(),
    usage_limits: usageLimitRule.nullable().optional(),
    defaults: requestDefaults.nullable().optional(),
    alert_emails: z.array(z.email()).max(20).nullable().optional(),
    expires_at: futureDate.nullable().optional(),
  })
  .strict()

export const updateApiKeyBody = z
  .object({
    workspace_id: workspaceIdField.optional(),
    name: name.optional(),
    description: description.optional(),
    scopes: z.array(z.string().min(1)).min(1).max(200).optional(),
    rate_limits: z.array(rateLimitRule).max(10).nullable().optional(),
    usage_limits: usageLimitRule.nullable().optional(),
    defaults: requestDefaults.nullable().optional(),
    alert_emails: z.array(z.email()).max(20).nullable().optional(),
    expires_at: futureDate.nullable().optional(),
    reset_usage: z.boolean().optional(),
  })
  .strict()

/** 30 minutes: the shortest (and default) transition during which a rotated-out secret still works. */
export const MIN_KEY_TRANSITION_MS = 1_800_000

export const rotateApiKeyBody = z
  .object({
    workspace_id: workspaceIdField.optional(),
    key_transition_period_ms: z.number().int().min(MIN_KEY_TRANSITION_MS).max(30 * 24 * 3_600_000).optional(),
  })
  .strict()

export const listApiKeysQuery = z.object({
  ...snakePaging,
  workspace_id: z.string().min(1).max(200).optional(),
})

// ---------------------------------------------------------------------------------------------
// Users and invites

export const updateUserBody = z.object({ role: organisationRoleInput }).strict()

export const listUsersQuery = z.object({
  ...camelPaging,
  role: z.enum(['owner', 'admin', 'member']).optional(),
  email: z.string().trim().toLowerCase().max(320).optional(),
})

export const createInviteBody = z
  .object({
    email,
    role: organisationRoleInput,
    workspaces: z
      .array(z.object({ id: z.string().min(1), role: workspaceRole }).strict())
      .max(100)
      .default([]),
    workspace_api_key_details: z
      .object({ scopes: z.array(z.string().min(1)).min(1).max(200) })
      .strict()
      .nullable()
      .optional(),
  })
  .strict()

export const listInvitesQuery = z.object({
  ...camelPaging,
  role: organisationRoleInput.optional(),
  email: z.string().trim().toLowerCase().max(320).optional(),
  status: z.enum(['pending', 'cancelled', 'accepted', 'expired']).optional(),
})

export const acceptInviteBody = z
  .object({
    first_name: z.string().trim().min(1).max(100),
    last_name: z.string().trim().max(100).default(''),
    password: z.string().min(8).max(256),
  })
  .strict()

// ---------------------------------------------------------------------------------------------
// Audit log

export const listAuditLogsQuery = z.object({
  ...snakePaging,
  start_time: isoDateTime.optional(),
  end_time: isoDateTime.optional(),
  method: z.enum(['POST', 'PUT', 'DELETE']).optional(),
  uri: z.string().max(2048).optional(),
  request_id: z.string().max(100).optional(),
  user_id: z.string().max(320).optional(),
  user_type: z.enum(['user', 'api_key']).optional(),
  api_key_id: z.string().max(100).optional().describe('The API key the request came through (also when it acted for a user)'),
  workspace_id: z.string().max(200).optional(),
  resource_type: z.string().max(100).optional(),
  action: z.string().max(100).optional(),
  response_status_code: z.coerce.number().int().min(100).max(599).optional(),
  client_ip: z.string().max(100).optional(),
})

/** The first problem of a failed parse as `field: message`. */
export function describeIssue(error: z.ZodError): string {
  const issue = error.issues[0]
  if (issue === undefined) return 'invalid request'
  const field = issue.path.length > 0 ? issue.path.map(String).join('.') : 'body'
  return `${field}: ${issue.message}`
}
