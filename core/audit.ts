/**
 * Audit entries of Admin API requests (API.md §5 "audit logs"), built the same way by whoever
 * stores them: the admin-api plugin (with the change, in one transaction) and the audit plugin
 * (refused or failed requests). Secrets never reach an entry: request body fields that carry
 * credentials are masked (keys) or replaced whole by `[redacted]` (passwords, tokens, other
 * secrets), and so is a `:token` path parameter (the invite link's secret). A body longer than
 * `MAX_AUDIT_BODY_CHARS` is cut, with a marker, so a hostile request cannot grow the store.
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
/**
 * Of those, the ones whose every character is secret (passwords, tokens, secrets, credentials):
 * replaced whole by `REDACTED`, since even a few characters of a short password help a guesser.
 * The rest (provider and API keys) keep the masked form, which tells keys apart.
 */
const WHOLLY_SECRET_FIELD = /pass(word|phrase)|token|secret|authori[sz]ation|credential|private|account_?json/i

/** What a wholly secret value is stored as. */
export const REDACTED = '[redacted]'

/** Longest request body text an audit entry keeps (longer ones are cut, with `truncatedBody`'s marker). */
export const MAX_AUDIT_BODY_CHARS = 16 * 1024

/** Gateway API key secrets, wherever they appear in a body (e.g. pasted into a description). */
const GATEWAY_SECRET = /^gw-[A-Za-z0-9_-]{20,}$/

const MAX_DEPTH = 20

function maskValue(name: string, value: unknown): unknown {
  if (WHOLLY_SECRET_FIELD.test(name)) return REDACTED
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
      const kept = secret && field !== null ? maskValue(name, field) : maskSecrets(field, depth + 1)
      // A body's own `__proto__` field (JSON.parse keeps it as data): assigning it would set the
      // copy's prototype instead, and the field would vanish from the stored entry.
      if (name === '__proto__') Object.defineProperty(masked, name, { value: kept, enumerable: true, writable: true, configurable: true })
      else masked[name] = kept
    }
    return masked
  }
  return value
}

/**
 * `text` (a masked body's JSON) if it fits `MAX_AUDIT_BODY_CHARS`; otherwise a JSON string holding a
 * `[truncated: <n> characters]` marker and as much of its start as fits, so the stored value stays
 * JSON and within the bound.
 */
export function truncatedBody(text: string): string {
  if (text.length <= MAX_AUDIT_BODY_CHARS) return text
  const marker = `[truncated: ${text.length} characters] `
  const room = MAX_AUDIT_BODY_CHARS - marker.length - 2
  let keep = room
  let stored = JSON.stringify(marker + text.slice(0, keep))
  // Escaping (quotes, backslashes, control characters) lengthens the text: shrink what is kept by
  // the escaping ratio seen so far until it fits (one or two rounds).
  while (stored.length > MAX_AUDIT_BODY_CHARS) {
    const escaped = stored.length - marker.length - 2
    keep = Math.min(keep - 1, Math.floor((keep * room) / escaped))
    stored = JSON.stringify(marker + text.slice(0, keep))
  }
  return stored
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
 * keys act for no one user); an unauthenticated caller is the user it names, if any. `apiKeyId`
 * always names the API key the request came through (none for a JWT or no credential), so an action
 * in a user's name can be traced to the key that did it.
 */
function actorOf(ctx: RequestContext, userId: string | null): Pick<AuditEntry, 'userId' | 'userType' | 'apiKeyId'> {
  const principal = ctx.principal
  if (principal === null) return { userId, userType: userId === null ? 'api_key' : 'user', apiKeyId: null }
  if (principal.kind === 'jwt') return { userId: principal.keyId, userType: 'user', apiKeyId: null }
  if (principal.keyType === 'workspace-user' && principal.userId !== null) return { userId: principal.userId, userType: 'user', apiKeyId: principal.keyId }
  return { userId: principal.keyId, userType: 'api_key', apiKeyId: principal.keyId }
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
  // An optional JSON body that was not sent reads as `{}` for the handler; the entry says none was sent.
  if (ctx.rawBody !== null && ctx.rawBody.length === 0) body = null
  else if (ctx.body !== null) body = truncatedBody(JSON.stringify(maskSecrets(ctx.body)))
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
