/**
 * Audit entries of Admin API requests (API.md §5 "audit logs"), built the same way by whoever
 * stores them: the admin-api plugin (with the change, in one transaction) and the audit plugin
 * (refused or failed requests). Secrets never reach an entry: request body fields that carry
 * credentials are masked, and so is a `:token` path parameter (the invite link's secret).
 */
import { randomUUID } from 'node:crypto'
import type { AuditEntry } from './admin-records.js'
import type { RequestContext } from './context.js'
import { maskSecret } from './secrets.js'

/**
 * Body field names whose values are credentials: `key`, `keys` (a virtual key's provider keys),
 * `api_key`, `password`, `*_secret`, `*_token`, ..., and their camelCase forms inside provider
 * settings (`awsSecretAccessKey`, `apiKey`, `sessionToken`, `serviceAccountJson`).
 */
const SECRET_FIELD = /^(keys?|api_?keys?|password|secret|token|authorization|credentials?|service_?account_?json)$|_(keys?|secret|token|password)$/i
const CAMEL_SECRET_FIELD = /[a-z0-9](Key|Keys|Secret|Token|Password|Credentials?|AccountJson)$/

/** Gateway API key secrets, wherever they appear in a body (e.g. pasted into a description). */
const GATEWAY_SECRET = /^gw-[A-Za-z0-9_-]{20,}$/

const MAX_DEPTH = 20

function maskValue(value: unknown): unknown {
  return typeof value === 'string' ? maskSecret(value) : '********'
}

/** A deep copy of a JSON value with credential fields and gateway secrets masked. */
export function maskSecrets(value: unknown, depth = 0): unknown {
  if (depth > MAX_DEPTH) return '…'
  if (typeof value === 'string') return GATEWAY_SECRET.test(value) ? maskSecret(value) : value
  if (Array.isArray(value)) return value.map((item) => maskSecrets(item, depth + 1))
  if (value !== null && typeof value === 'object') {
    const masked: Record<string, unknown> = {}
    for (const [name, field] of Object.entries(value)) {
      const secret = SECRET_FIELD.test(name) || CAMEL_SECRET_FIELD.test(name)
      masked[name] = secret && field !== null ? maskValue(field) : maskSecrets(field, depth + 1)
    }
    return masked
  }
  return value
}

/** The query string as a JSON object text; a repeated parameter keeps its last value. */
function queryJson(query: string): string {
  if (query.length === 0) return '{}'
  return JSON.stringify(Object.fromEntries(new URLSearchParams(query)))
}

/** The request path with a `:token` parameter masked, plus the query string. */
function auditedUri(ctx: RequestContext): string {
  let path = ctx.path
  const token = ctx.params.token
  if (token !== undefined) path = path.replace(encodeURIComponent(token), maskSecret(token)).replace(token, maskSecret(token))
  return ctx.query.length === 0 ? path : `${path}?${ctx.query}`
}

export interface AuditFacts {
  readonly status: number
  /** Organisation to file the entry under when the request carries no principal. */
  readonly organisationId?: string | null
  /** The workspace (UUID) the action touched. */
  readonly workspaceId?: string | null
  /** The resource acted on (overrides the route's path parameter, e.g. the id of a created resource). */
  readonly resourceId?: string | null
  /** The user behind an unauthenticated action (invite acceptance). */
  readonly userId?: string | null
}

/**
 * Who acted: the user behind a workspace user key or a JWT, otherwise the API key itself (service
 * keys act for no one user); an unauthenticated caller is the user it names, if any.
 */
function actorOf(ctx: RequestContext, userId: string | null): Pick<AuditEntry, 'userId' | 'userType'> {
  const principal = ctx.principal
  if (principal === null) return { userId, userType: userId === null ? 'api_key' : 'user' }
  if (principal.kind === 'jwt') return { userId: principal.keyId, userType: 'user' }
  if (principal.keyType === 'workspace-user' && principal.userId !== null) return { userId: principal.userId, userType: 'user' }
  return { userId: principal.keyId, userType: 'api_key' }
}

/**
 * The audit entry of an audited admin request (`ctx.route.audit` set).
 */
export function auditEntryOf(ctx: RequestContext, facts: AuditFacts): AuditEntry {
  const route = ctx.route
  const audit = route.audit
  const principal = ctx.principal
  const paramResource = audit?.resourceParam == null ? null : (ctx.params[audit.resourceParam] ?? null)
  let body: string | null = null
  if (ctx.body !== null) body = JSON.stringify(maskSecrets(ctx.body))
  else if (ctx.rawBody !== null && ctx.rawBody.length > 0) body = JSON.stringify('(unparsed body)')
  return {
    id: randomUUID(),
    timestamp: new Date(ctx.receivedAt).toISOString(),
    organisationId: principal?.organisationId ?? facts.organisationId ?? null,
    workspaceId: facts.workspaceId ?? principal?.workspaceId ?? null,
    ...actorOf(ctx, facts.userId ?? null),
    method: ctx.method,
    uri: auditedUri(ctx),
    requestId: ctx.requestId,
    requestBody: body,
    queryParams: queryJson(ctx.query),
    responseStatusCode: facts.status,
    resourceType: audit?.resourceType ?? 'unknown',
    action: audit?.action ?? ctx.method.toLowerCase(),
    resourceId: facts.resourceId ?? paramResource,
    clientIp: ctx.clientIp,
  }
}
