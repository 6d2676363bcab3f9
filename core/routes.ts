/**
 * The route table: which (method, path) belongs to which route group, what body it carries,
 * and which scopes admit it. Matching is precompiled: data-plane routes are one Map lookup;
 * Admin API routes are a short list of segment patterns tried only on non-inference paths.
 *
 * The plane rule (API.md §2): first-class inference routes and `POST /v1/prompts/{id}/completions`
 * and `/render` are always data plane. Any other `/v1`
 * path is pass-through when the request selects a provider; otherwise it is matched against the
 * Admin API, and a path that names no admin route is still handed to the pass-through group so that
 * authentication runs first and the terminal plugin reports "missing provider selection".
 */

import type { ApiFormat } from './errors.js'
import { GRAPH_NAMES, GROUP_NAMES } from './logs.js'

export const HTTP_METHODS = ['GET', 'POST', 'PUT', 'DELETE'] as const
export type HttpMethod = (typeof HTTP_METHODS)[number]

/** Route groups; each has its own compiled pipeline. `core` routes run no plugins. */
export const ROUTE_GROUPS = ['inference', 'passthrough', 'admin'] as const
export type RouteGroup = (typeof ROUTE_GROUPS)[number]

/**
 * How a route's request body is read: parsed JSON, JSON that may be absent (an empty body reads as
 * `{}`), raw bytes, or not at all.
 */
export type BodyMode = 'json' | 'json-optional' | 'raw' | 'none'

/** What an audited (state-changing) Admin API route does, for its audit entry. */
export interface AuditAction {
  /**
   * `workspace`, `workspace_user`, `user`, `invite`, `api_key`, `organisation`, `virtual_key`, `feedback`, `log_export`,
   * `prompt`, `prompt_version`, `prompt_partial`, `label`, `collection`, `config`.
   */
  readonly resourceType: string
  /** `create`, `update`, `delete`, `rotate`, `resend`, `accept`, `start`, `cancel`, `publish`. */
  readonly action: string
  /** The path parameter naming the resource acted on, if any. */
  readonly resourceParam: string | null
}

export interface RouteSpec {
  /** Stable id, used in logs and by terminal plugins to pick a handler (`chat.completions`, `admin.workspaces.create`). */
  readonly id: string
  readonly group: RouteGroup
  readonly method: HttpMethod
  /** Path pattern; `:name` segments are parameters. */
  readonly pattern: string
  readonly body: BodyMode
  /** Which size limit applies: JSON bodies or uploads (multipart, audio, pass-through). */
  readonly bodyLimit: 'json' | 'upload'
  /** Any one of these scopes admits the route. */
  readonly scopes: readonly string[]
  /** Only organisation (Admin API) keys may call it. */
  readonly adminKeyOnly: boolean
  /** Served without authentication (the invite link, the OpenAPI document). */
  readonly public: boolean
  /** Set on state-changing Admin API routes: every call is written to the audit log. */
  readonly audit: AuditAction | null
  /** For data-plane routes: the path sent upstream, relative to the provider base URL. */
  readonly upstreamPath: string | null
  /**
   * The API the route speaks, which shapes its error replies and the error event that ends a
   * broken stream (API.md §2). Pass-through takes it from the path (`passthroughFormat`); Admin API
   * routes are `openai` and answer in their own envelope whatever this says.
   */
  readonly format: ApiFormat
}

export interface RouteMatch {
  readonly route: RouteSpec
  readonly params: Readonly<Record<string, string>>
}

const NO_PARAMS: Readonly<Record<string, string>> = Object.freeze({})

function dataRoute(id: string, method: HttpMethod, path: string, body: BodyMode, bodyLimit: 'json' | 'upload', scopes: readonly string[]): RouteSpec {
  return Object.freeze({
    id,
    group: 'inference',
    method,
    pattern: path,
    body,
    bodyLimit,
    scopes,
    adminKeyOnly: false,
    public: false,
    audit: null,
    upstreamPath: path.slice('/v1'.length),
    format: 'openai',
  })
}

const COMPLETIONS = ['completions.write'] as const

/** First-class inference routes (OpenAI formats). */
export const INFERENCE_ROUTES: readonly RouteSpec[] = [
  dataRoute('chat.completions', 'POST', '/v1/chat/completions', 'json', 'json', COMPLETIONS),
  dataRoute('completions', 'POST', '/v1/completions', 'json', 'json', COMPLETIONS),
  dataRoute('embeddings', 'POST', '/v1/embeddings', 'json', 'json', COMPLETIONS),
  dataRoute('audio.speech', 'POST', '/v1/audio/speech', 'json', 'json', COMPLETIONS),
  dataRoute('audio.transcriptions', 'POST', '/v1/audio/transcriptions', 'raw', 'upload', COMPLETIONS),
  dataRoute('audio.translations', 'POST', '/v1/audio/translations', 'raw', 'upload', COMPLETIONS),
  dataRoute('images.generations', 'POST', '/v1/images/generations', 'json', 'json', COMPLETIONS),
  dataRoute('models.list', 'GET', '/v1/models', 'none', 'json', ['virtual_keys.list', 'completions.write']),
]

function promptRoute(id: string, action: 'completions' | 'render', scopes: readonly string[]): RouteSpec {
  return Object.freeze({
    id,
    group: 'inference',
    method: 'POST',
    pattern: `/v1/prompts/:promptId/${action}`,
    body: 'json',
    bodyLimit: 'json',
    scopes,
    adminKeyOnly: false,
    public: false,
    audit: null,
    // Decided per request by the prompt-render plugin (`ctx.prompt.route`): a chat template goes to
    // `/chat/completions`, a completion template to `/completions`.
    upstreamPath: null,
    format: 'openai',
  })
}

/**
 * Prompt routes (API.md §3): data plane whatever headers the request carries, in the inference
 * group, served by the prompt-render plugin. `completions` renders the template and sends it on as
 * a chat/completions (or completions) request; `render` answers the rendered request body.
 */
export const PROMPT_ROUTES = Object.freeze({
  completions: promptRoute('prompts.completions', 'completions', COMPLETIONS),
  render: promptRoute('prompts.render', 'render', ['prompts.render']),
})

const PROMPTS_PREFIX = '/v1/prompts/'

/**
 * `POST /v1/prompts/{promptId}/completions` or `/render`, with the id decoded; `null` for any other
 * path (other methods on these paths fall through to the Admin API / pass-through rules). One
 * native prefix check for every path that is not a first-class route.
 */
function promptRouteMatch(method: string, path: string): RouteMatch | null {
  if (method !== 'POST' || !path.startsWith(PROMPTS_PREFIX)) return null
  const slash = path.indexOf('/', PROMPTS_PREFIX.length)
  if (slash <= PROMPTS_PREFIX.length) return null
  const action = path.slice(slash + 1)
  const route = action === 'completions' ? PROMPT_ROUTES.completions : action === 'render' ? PROMPT_ROUTES.render : null
  if (route === null) return null
  let promptId: string
  try {
    promptId = decodeURIComponent(path.slice(PROMPTS_PREFIX.length, slash))
  } catch {
    return null
  }
  return { route, params: { promptId } }
}

/** Pass-through: any other `/v1` path, one spec per format and method (the path is the request's own). */
const PASSTHROUGH_ROUTES: Readonly<Record<ApiFormat, Readonly<Record<HttpMethod, RouteMatch>>>> = Object.freeze({
  openai: passthroughRoutes('openai'),
  responses: passthroughRoutes('responses'),
  messages: passthroughRoutes('messages'),
})

function passthroughRoutes(format: ApiFormat): Readonly<Record<HttpMethod, RouteMatch>> {
  const match = (route: RouteSpec): RouteMatch => Object.freeze({ route, params: NO_PARAMS })
  return Object.freeze({
    GET: match(passthrough('GET', 'none', format)),
    POST: match(passthrough('POST', 'raw', format)),
    PUT: match(passthrough('PUT', 'raw', format)),
    DELETE: match(passthrough('DELETE', 'raw', format)),
  })
}

/**
 * The format of a pass-through path: `/v1/responses[/…]` speaks the OpenAI Responses API,
 * `/v1/messages[/…]` the Anthropic Messages API, anything else the OpenAI one. Two native prefix
 * checks per pass-through request.
 */
export function passthroughFormat(path: string): ApiFormat {
  if (path.startsWith('/v1/responses') && (path.length === 13 || path.charCodeAt(13) === 0x2f)) return 'responses'
  if (path.startsWith('/v1/messages') && (path.length === 12 || path.charCodeAt(12) === 0x2f)) return 'messages'
  return 'openai'
}

function passthrough(method: HttpMethod, body: BodyMode, format: ApiFormat): RouteSpec {
  return Object.freeze({
    id: 'passthrough',
    group: 'passthrough',
    method,
    pattern: '/v1/*',
    body,
    bodyLimit: 'upload',
    scopes: COMPLETIONS,
    adminKeyOnly: false,
    public: false,
    audit: null,
    upstreamPath: null,
    format,
  })
}

interface AdminRouteOptions {
  readonly adminKeyOnly?: boolean
  readonly public?: boolean
  readonly body?: BodyMode
  /** `resourceType.action[:param]` for audited routes, e.g. `workspace.update:workspaceId`. */
  readonly audit?: string
}

function parseAudit(text: string): AuditAction {
  const [what, resourceParam] = text.split(':')
  const [resourceType, action] = (what ?? '').split('.')
  if (resourceType === undefined || action === undefined) throw new Error(`bad audit spec "${text}"`)
  return Object.freeze({ resourceType, action, resourceParam: resourceParam ?? null })
}

function adminRoute<const Id extends string>(
  id: Id,
  method: HttpMethod,
  pattern: string,
  scopes: readonly string[],
  options: AdminRouteOptions = {},
): RouteSpec & { readonly id: Id } {
  return Object.freeze({
    id,
    group: 'admin',
    method,
    pattern,
    body: options.body ?? (method === 'GET' || method === 'DELETE' ? 'none' : 'json'),
    bodyLimit: 'json',
    scopes,
    adminKeyOnly: options.adminKeyOnly ?? false,
    public: options.public ?? false,
    audit: options.audit === undefined ? null : parseAudit(options.audit),
    upstreamPath: null,
    format: 'openai',
  })
}

/** The scope of each API key type for one action (`list`, `read`, ...), in key-type order. */
function apiKeyScopes(action: string): readonly string[] {
  return [`organisation_service_api_keys.${action}`, `workspace_service_api_keys.${action}`, `workspace_user_api_keys.${action}`]
}

const ADMIN_ONLY = { adminKeyOnly: true } as const
const ANALYTICS = ['analytics.view'] as const
/** `logs.write` per the reference; gateway-local JWTs may carry `feedbacks.write` instead. */
const FEEDBACK = ['logs.write', 'feedbacks.write'] as const
const EXPORTS = ['logs.export'] as const

/**
 * Admin API routes (API.md §5) served by the admin-api plugin. Order matters where two patterns
 * match one path: `/admin/users/invites` is listed before `/admin/users/:userId`. Routes on API
 * keys admit the scope of any key type; the handler then requires the one of the key acted on.
 * DELETEs of workspace resources read an optional JSON body, since `workspace_id` may come in it
 * (API.md §1); a body sent on a `none` route would be ignored unchecked.
 */
export const ADMIN_ROUTES = [
  adminRoute('admin.organisation.get', 'GET', '/v1/admin/organisation', ['organisation_settings.read'], ADMIN_ONLY),
  adminRoute('admin.organisation.jwt.get', 'GET', '/v1/admin/organisation/jwt', ['organisation_settings.read'], ADMIN_ONLY),
  adminRoute('admin.organisation.jwt.update', 'PUT', '/v1/admin/organisation/jwt', ['organisation_settings.update'], { ...ADMIN_ONLY, audit: 'organisation.update' }),
  adminRoute('admin.organisation.jwt.delete', 'DELETE', '/v1/admin/organisation/jwt', ['organisation_settings.update'], { ...ADMIN_ONLY, audit: 'organisation.update' }),

  adminRoute('admin.workspaces.create', 'POST', '/v1/admin/workspaces', ['workspaces.create'], { ...ADMIN_ONLY, audit: 'workspace.create' }),
  adminRoute('admin.workspaces.list', 'GET', '/v1/admin/workspaces', ['workspaces.list']),
  adminRoute('admin.workspaces.get', 'GET', '/v1/admin/workspaces/:workspaceId', ['workspaces.read']),
  adminRoute('admin.workspaces.update', 'PUT', '/v1/admin/workspaces/:workspaceId', ['workspaces.update'], { audit: 'workspace.update:workspaceId' }),
  adminRoute('admin.workspaces.delete', 'DELETE', '/v1/admin/workspaces/:workspaceId', ['workspaces.delete'], {
    ...ADMIN_ONLY,
    body: 'json-optional',
    audit: 'workspace.delete:workspaceId',
  }),
  adminRoute('admin.workspaces.members.add', 'POST', '/v1/admin/workspaces/:workspaceId/users', ['workspace_users.create'], { audit: 'workspace_user.create:workspaceId' }),
  adminRoute('admin.workspaces.members.list', 'GET', '/v1/admin/workspaces/:workspaceId/users', ['workspace_users.list']),
  adminRoute('admin.workspaces.members.get', 'GET', '/v1/admin/workspaces/:workspaceId/users/:userId', ['workspace_users.read']),
  adminRoute('admin.workspaces.members.update', 'PUT', '/v1/admin/workspaces/:workspaceId/users/:userId', ['workspace_users.update'], { audit: 'workspace_user.update:userId' }),
  adminRoute('admin.workspaces.members.delete', 'DELETE', '/v1/admin/workspaces/:workspaceId/users/:userId', ['workspace_users.delete'], {
    body: 'json-optional',
    audit: 'workspace_user.delete:userId',
  }),

  adminRoute('admin.invites.create', 'POST', '/v1/admin/users/invites', ['organisation_users.create'], { ...ADMIN_ONLY, audit: 'invite.create' }),
  adminRoute('admin.invites.list', 'GET', '/v1/admin/users/invites', ['organisation_users.list'], ADMIN_ONLY),
  adminRoute('admin.invites.get', 'GET', '/v1/admin/users/invites/:inviteId', ['organisation_users.read'], ADMIN_ONLY),
  adminRoute('admin.invites.delete', 'DELETE', '/v1/admin/users/invites/:inviteId', ['organisation_users.delete'], { ...ADMIN_ONLY, audit: 'invite.delete:inviteId' }),
  adminRoute('admin.invites.resend', 'POST', '/v1/admin/users/invites/:inviteId/resend', ['organisation_users.create'], {
    ...ADMIN_ONLY,
    body: 'json-optional',
    audit: 'invite.resend:inviteId',
  }),
  adminRoute('admin.users.list', 'GET', '/v1/admin/users', ['organisation_users.list'], ADMIN_ONLY),
  adminRoute('admin.users.get', 'GET', '/v1/admin/users/:userId', ['organisation_users.read'], ADMIN_ONLY),
  adminRoute('admin.users.update', 'PUT', '/v1/admin/users/:userId', ['organisation_users.update'], { ...ADMIN_ONLY, audit: 'user.update:userId' }),
  adminRoute('admin.users.delete', 'DELETE', '/v1/admin/users/:userId', ['organisation_users.delete'], { ...ADMIN_ONLY, audit: 'user.delete:userId' }),

  adminRoute('invites.show', 'GET', '/v1/invites/:token', [], { public: true }),
  adminRoute('invites.accept', 'POST', '/v1/invites/:token', [], { public: true, audit: 'invite.accept' }),

  adminRoute('api-keys.organisation-service.create', 'POST', '/v1/api-keys/organisation/service', ['organisation_service_api_keys.create'], {
    ...ADMIN_ONLY,
    audit: 'api_key.create',
  }),
  adminRoute('api-keys.workspace-service.create', 'POST', '/v1/api-keys/workspace/service', ['workspace_service_api_keys.create'], { audit: 'api_key.create' }),
  adminRoute('api-keys.workspace-user.create', 'POST', '/v1/api-keys/workspace/user', ['workspace_user_api_keys.create'], { audit: 'api_key.create' }),
  adminRoute('api-keys.list', 'GET', '/v1/api-keys', apiKeyScopes('list')),
  adminRoute('api-keys.get', 'GET', '/v1/api-keys/:apiKeyId', apiKeyScopes('read')),
  adminRoute('api-keys.update', 'PUT', '/v1/api-keys/:apiKeyId', apiKeyScopes('update'), { audit: 'api_key.update:apiKeyId' }),
  adminRoute('api-keys.delete', 'DELETE', '/v1/api-keys/:apiKeyId', apiKeyScopes('delete'), { body: 'json-optional', audit: 'api_key.delete:apiKeyId' }),
  adminRoute('api-keys.rotate', 'POST', '/v1/api-keys/:apiKeyId/rotate', [...apiKeyScopes('rotate'), ...apiKeyScopes('update')], {
    body: 'json-optional',
    audit: 'api_key.rotate:apiKeyId',
  }),

  adminRoute('virtual-keys.create', 'POST', '/v1/virtual-keys', ['virtual_keys.create'], { audit: 'virtual_key.create' }),
  adminRoute('virtual-keys.list', 'GET', '/v1/virtual-keys', ['virtual_keys.list']),
  adminRoute('virtual-keys.get', 'GET', '/v1/virtual-keys/:virtualKeyId', ['virtual_keys.read']),
  adminRoute('virtual-keys.update', 'PUT', '/v1/virtual-keys/:virtualKeyId', ['virtual_keys.update'], { audit: 'virtual_key.update:virtualKeyId' }),
  adminRoute('virtual-keys.delete', 'DELETE', '/v1/virtual-keys/:virtualKeyId', ['virtual_keys.delete'], { body: 'json-optional', audit: 'virtual_key.delete:virtualKeyId' }),

  adminRoute('configs.create', 'POST', '/v1/configs', ['configs.create'], { audit: 'config.create' }),
  adminRoute('configs.list', 'GET', '/v1/configs', ['configs.list']),
  adminRoute('configs.get', 'GET', '/v1/configs/:configId', ['configs.read']),
  adminRoute('configs.update', 'PUT', '/v1/configs/:configId', ['configs.update'], { audit: 'config.update:configId' }),
  adminRoute('configs.delete', 'DELETE', '/v1/configs/:configId', ['configs.delete'], { body: 'json-optional', audit: 'config.delete:configId' }),
  adminRoute('configs.versions.list', 'GET', '/v1/configs/:configId/versions', ['configs.read']),

  adminRoute('audit-logs.list', 'GET', '/v1/audit-logs', ['audit_logs.list'], ADMIN_ONLY),

  // Prompt templates (API.md §5). Partials first: `/v1/prompts/partials…` would otherwise be read as
  // a prompt called `partials`. `/v1/prompts/:promptId/completions` and `/render` are data-plane
  // routes: no admin pattern here has `completions` or `render` as its last segment, so none shadows them.
  adminRoute('prompts.partials.create', 'POST', '/v1/prompts/partials', ['prompts.create'], { audit: 'prompt_partial.create' }),
  adminRoute('prompts.partials.list', 'GET', '/v1/prompts/partials', ['prompts.list']),
  adminRoute('prompts.partials.get', 'GET', '/v1/prompts/partials/:partialId', ['prompts.read']),
  adminRoute('prompts.partials.update', 'PUT', '/v1/prompts/partials/:partialId', ['prompts.update'], { audit: 'prompt_partial.update:partialId' }),
  adminRoute('prompts.partials.delete', 'DELETE', '/v1/prompts/partials/:partialId', ['prompts.delete'], { body: 'json-optional', audit: 'prompt_partial.delete:partialId' }),
  adminRoute('prompts.partials.versions.list', 'GET', '/v1/prompts/partials/:partialId/versions', ['prompts.read']),
  adminRoute('prompts.partials.publish', 'PUT', '/v1/prompts/partials/:partialId/makeDefault', ['prompts.publish'], { audit: 'prompt_partial.publish:partialId' }),
  adminRoute('prompts.create', 'POST', '/v1/prompts', ['prompts.create'], { audit: 'prompt.create' }),
  adminRoute('prompts.list', 'GET', '/v1/prompts', ['prompts.list']),
  adminRoute('prompts.get', 'GET', '/v1/prompts/:promptId', ['prompts.read']),
  adminRoute('prompts.update', 'PUT', '/v1/prompts/:promptId', ['prompts.update'], { audit: 'prompt.update:promptId' }),
  adminRoute('prompts.delete', 'DELETE', '/v1/prompts/:promptId', ['prompts.delete'], { body: 'json-optional', audit: 'prompt.delete:promptId' }),
  adminRoute('prompts.versions.list', 'GET', '/v1/prompts/:promptId/versions', ['prompts.read']),
  adminRoute('prompts.versions.get', 'GET', '/v1/prompts/:promptId/versions/:versionId', ['prompts.read']),
  adminRoute('prompts.versions.update', 'PUT', '/v1/prompts/:promptId/versions/:versionId', ['prompts.update'], { audit: 'prompt_version.update:versionId' }),
  adminRoute('prompts.publish', 'PUT', '/v1/prompts/:promptId/makeDefault', ['prompts.publish'], { audit: 'prompt.publish:promptId' }),
  // Labels and collections have no scopes of their own in the reference: `prompts.*` admits them.
  adminRoute('labels.create', 'POST', '/v1/labels', ['prompts.create'], { audit: 'label.create' }),
  adminRoute('labels.list', 'GET', '/v1/labels', ['prompts.list']),
  adminRoute('labels.get', 'GET', '/v1/labels/:labelId', ['prompts.read']),
  adminRoute('labels.update', 'PUT', '/v1/labels/:labelId', ['prompts.update'], { audit: 'label.update:labelId' }),
  adminRoute('labels.delete', 'DELETE', '/v1/labels/:labelId', ['prompts.delete'], { body: 'json-optional', audit: 'label.delete:labelId' }),
  adminRoute('collections.create', 'POST', '/v1/collections', ['prompts.create'], { audit: 'collection.create' }),
  adminRoute('collections.list', 'GET', '/v1/collections', ['prompts.list']),
  adminRoute('collections.get', 'GET', '/v1/collections/:collectionId', ['prompts.read']),
  adminRoute('collections.update', 'PUT', '/v1/collections/:collectionId', ['prompts.update'], { audit: 'collection.update:collectionId' }),
  adminRoute('collections.delete', 'DELETE', '/v1/collections/:collectionId', ['prompts.delete'], { body: 'json-optional', audit: 'collection.delete:collectionId' }),

  ...GRAPH_NAMES.map((name) => adminRoute(`analytics.graphs.${name}`, 'GET', `/v1/analytics/graphs/${name}`, ANALYTICS)),
  ...GROUP_NAMES.filter((name) => name !== 'metadata').map((name) => adminRoute(`analytics.groups.${name}`, 'GET', `/v1/analytics/groups/${name}`, ANALYTICS)),
  adminRoute('analytics.groups.metadata', 'GET', '/v1/analytics/groups/metadata/:metadataKey', ANALYTICS),
  adminRoute('analytics.summary.cache', 'GET', '/v1/analytics/summary/cache', ANALYTICS),

  // Feedback and custom logs take one object or an array, so the handler parses the raw JSON body.
  adminRoute('feedback.create', 'POST', '/v1/feedback', FEEDBACK, { body: 'raw', audit: 'feedback.create' }),
  adminRoute('feedback.update', 'PUT', '/v1/feedback/:feedbackId', FEEDBACK, { audit: 'feedback.update:feedbackId' }),

  // Listed before `/v1/logs/:logId`, which would otherwise take `GET /v1/logs/exports`.
  adminRoute('logs.exports.create', 'POST', '/v1/logs/exports', EXPORTS, { audit: 'log_export.create' }),
  adminRoute('logs.exports.list', 'GET', '/v1/logs/exports', EXPORTS),
  adminRoute('logs.exports.get', 'GET', '/v1/logs/exports/:exportId', EXPORTS),
  adminRoute('logs.exports.update', 'PUT', '/v1/logs/exports/:exportId', EXPORTS, { audit: 'log_export.update:exportId' }),
  adminRoute('logs.exports.start', 'POST', '/v1/logs/exports/:exportId/start', EXPORTS, { body: 'json-optional', audit: 'log_export.start:exportId' }),
  adminRoute('logs.exports.cancel', 'POST', '/v1/logs/exports/:exportId/cancel', EXPORTS, { body: 'json-optional', audit: 'log_export.cancel:exportId' }),
  adminRoute('logs.exports.download', 'GET', '/v1/logs/exports/:exportId/download', EXPORTS),
  // The signed URL `download` hands out: the signature in the query is the credential.
  adminRoute('logs.exports.file', 'GET', '/v1/logs/exports/:exportId/file', [], { public: true }),
  // Custom logs are data-plane writes (reference §1.1): not audited, like proxied requests.
  adminRoute('logs.create', 'POST', '/v1/logs', ['logs.write'], { body: 'raw' }),
  adminRoute('logs.get', 'GET', '/v1/logs/:logId', ['logs.read', 'logs.view', 'logs.write', 'completions.write']),

  adminRoute('openapi.get', 'GET', '/v1/openapi.json', [], { public: true }),
] as const satisfies readonly RouteSpec[]

/** The id of an Admin API route: the Admin API's handler maps are keyed by these (a misspelt id does not compile). */
export type AdminRouteId = (typeof ADMIN_ROUTES)[number]['id']

interface CompiledPattern {
  readonly route: RouteSpec
  readonly segments: readonly string[]
}

/** Splits a path into segments, ignoring one trailing slash. */
function segmentsOf(path: string): string[] {
  const trimmed = path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path
  return trimmed.split('/')
}

function matchSegments(pattern: readonly string[], actual: readonly string[]): Record<string, string> | null {
  if (pattern.length !== actual.length) return null
  let params: Record<string, string> | null = null
  for (let i = 0; i < pattern.length; i++) {
    const expected = pattern[i] as string
    const value = actual[i] as string
    if (expected.startsWith(':')) {
      if (value.length === 0) return null
      params ??= {}
      try {
        params[expected.slice(1)] = decodeURIComponent(value)
      } catch {
        // A malformed %-escape names no resource: no match (it must never throw in the handler).
        return null
      }
    } else if (expected !== value) {
      return null
    }
  }
  return params ?? {}
}

/** The result of matching a request: a route, or the reason none applies. */
export type RouteLookup =
  | { readonly kind: 'route'; readonly match: RouteMatch }
  | { readonly kind: 'core'; readonly name: 'healthz' | 'readyz' | 'metrics' }
  | { readonly kind: 'not-found' }
  | { readonly kind: 'method-not-allowed' }
  /** A `/v1` path with a `.` or `..` segment (see `hasDotSegment`): refused with 400 before any plugin runs. */
  | { readonly kind: 'bad-path' }

/** Escapes that can spell a dot or a separator; `%25` too, for paths an upstream decodes twice. */
const DOT_OR_SEPARATOR_ESCAPE = /%(?:2e|2f|5c|25)/gi
/** Decoding rounds after which a path still holding such escapes is refused rather than decoded on. */
const MAX_DECODE_ROUNDS = 3

/**
 * Whether `path` has a `.` or `..` segment in any spelling an upstream server may read as one: raw,
 * percent-encoded (`%2e`, `%2E`, mixed, double-encoded `%252e`), with `\` or an encoded slash
 * (`%2f`, `%5c`) as the separator, or with a `;parameter` after the dots (`..;`, read as `..` by
 * some Java servers). Pass-through appends the client's path to the provider's base path, so such
 * a segment would climb out of the base path of a custom host (`/v1/../../x` → `/base/../../x`).
 * Encoded slashes that form no dot segment (`/v1/files/a%2Fb`) are allowed and forwarded as sent.
 */
export function hasDotSegment(path: string): boolean {
  // Almost every path has none of these: three native scans, no allocation.
  if (path.indexOf('.') === -1 && path.indexOf('%') === -1 && path.indexOf('\\') === -1) return false
  let text = path
  for (let round = 0; ; round++) {
    if (hasRawDotSegment(text)) return true
    if (text.indexOf('%') === -1) return false
    const decoded = text.replace(DOT_OR_SEPARATOR_ESCAPE, decodeEscape)
    if (decoded === text) return false
    if (round === MAX_DECODE_ROUNDS) return true
    text = decoded
  }
}

function decodeEscape(escape: string): string {
  return String.fromCharCode(parseInt(escape.slice(1), 16))
}

function hasRawDotSegment(text: string): boolean {
  let start = 0
  for (let i = 0; i <= text.length; i++) {
    const c = i === text.length ? 0x2f : text.charCodeAt(i)
    if (c !== 0x2f && c !== 0x5c) continue
    let end = start
    while (end < i && end - start < 3 && text.charCodeAt(end) === 0x2e) end++
    const dots = end - start
    // `.` or `..`, alone or followed by a `;parameter`.
    if ((dots === 1 || dots === 2) && (end === i || text.charCodeAt(end) === 0x3b)) return true
    start = i + 1
  }
  return false
}

/**
 * A compiled route table. `lookup` is the hot-path entry: it allocates nothing for first-class
 * routes and core routes.
 */
export class RouteTable {
  readonly #inference = new Map<string, RouteMatch>()
  readonly #admin: readonly CompiledPattern[]

  constructor(inference: readonly RouteSpec[] = INFERENCE_ROUTES, admin: readonly RouteSpec[] = ADMIN_ROUTES) {
    for (const route of inference) this.#inference.set(`${route.method} ${route.pattern}`, Object.freeze({ route, params: NO_PARAMS }))
    this.#admin = admin.map((route) => ({ route, segments: segmentsOf(route.pattern) }))
  }

  /**
   * @param method upper-case request method
   * @param path the path without query string
   * @param selectsProvider whether the request carries a provider selection header
   */
  lookup(method: string, path: string, selectsProvider: boolean): RouteLookup {
    const first = this.#inference.get(`${method} ${path}`)
    if (first !== undefined) return { kind: 'route', match: first }
    if (path === '/healthz' || path === '/readyz' || path === '/metrics') {
      return method === 'GET' ? { kind: 'core', name: path.slice(1) as 'healthz' | 'readyz' | 'metrics' } : { kind: 'method-not-allowed' }
    }
    if (path !== '/v1' && !path.startsWith('/v1/')) return { kind: 'not-found' }
    if (hasDotSegment(path)) return { kind: 'bad-path' }
    if (!isHttpMethod(method)) return { kind: 'method-not-allowed' }
    const prompt = promptRouteMatch(method, path)
    if (prompt !== null) return { kind: 'route', match: prompt }
    if (!selectsProvider) {
      const segments = segmentsOf(path)
      let pathKnown = false
      for (const candidate of this.#admin) {
        const params = matchSegments(candidate.segments, segments)
        if (params === null) continue
        if (candidate.route.method === method) return { kind: 'route', match: { route: candidate.route, params } }
        pathKnown = true
      }
      if (pathKnown) return { kind: 'method-not-allowed' }
    }
    return { kind: 'route', match: PASSTHROUGH_ROUTES[passthroughFormat(path)][method] }
  }
}

export function isHttpMethod(method: string): method is HttpMethod {
  return method === 'GET' || method === 'POST' || method === 'PUT' || method === 'DELETE'
}

/** The headers that select a provider and so make a non-first-class `/v1` path a pass-through call. */
export function selectsProvider(headers: Readonly<Record<string, string>>): boolean {
  return (
    headers['x-gateway-provider'] !== undefined ||
    headers['x-gateway-virtual-key'] !== undefined ||
    headers['x-gateway-config'] !== undefined
  )
}
