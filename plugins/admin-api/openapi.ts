/**
 * `GET /v1/openapi.json` (public): an OpenAPI 3.0.3 document of every Admin API route in
 * `ADMIN_ROUTES`. Paths, methods, scopes and security come from the route table; request bodies
 * and query parameters are generated from the same zod schemas the handlers validate with
 * (`OPERATION_SCHEMAS` below), so the document cannot drift from what the gateway accepts.
 * Built on first request and served from the cached text afterwards.
 */
import { z } from 'zod'
import { ERRORS, type AdminErrorCode } from '../../core/errors.js'
import { GRAPH_NAMES, GROUP_NAMES } from '../../core/logs.js'
import type { Reply } from '../../core/plugin.js'
import { ADMIN_ROUTES, type RouteSpec } from '../../core/routes.js'
import type { PublicHandlerMap } from './request.js'
import {
  acceptInviteBody,
  addMembersBody,
  createApiKeyBody,
  createInviteBody,
  createWorkspaceBody,
  deleteWorkspaceBody,
  deleteWorkspaceQuery,
  jwtSettingsBody,
  listApiKeysQuery,
  listAuditLogsQuery,
  listInvitesQuery,
  listMembersQuery,
  listUsersQuery,
  listWorkspacesQuery,
  rotateApiKeyBody,
  updateApiKeyBody,
  updateMemberBody,
  updateUserBody,
  updateWorkspaceBody,
  workspaceIdBody,
  workspaceIdQuery,
} from './schemas.js'
import { createVirtualKeyBody, listVirtualKeysQuery, updateVirtualKeyBody, virtualKeyWorkspaceQuery } from './virtual-keys.js'
import { configWorkspaceQuery, createConfigBody, deleteConfigBody, deleteConfigQuery, listConfigsQuery, listConfigVersionsQuery, updateConfigBody } from './configs.js'
import { createFeedbackBody, updateFeedbackBody } from './feedback.js'
import { analyticsGroupQuery, analyticsQuery } from './log-filters.js'
import { createExportBody, exportFileQuery, listExportsQuery, updateExportBody } from './log-exports.js'
import { createLogsBody } from './logs.js'
import { collectionWorkspaceQuery, createCollectionBody, deleteCollectionBody, listCollectionsQuery, updateCollectionBody } from './collections.js'
import { createLabelBody, deleteLabelBody, labelQuery, listLabelsQuery, updateLabelBody } from './labels.js'
import { createPartialBody, deletePartialBody, listPartialsQuery, partialWorkspaceQuery, publishPartialBody, updatePartialBody } from './partials.js'
import { createPromptBody, deletePromptBody, listPromptsQuery, promptWorkspaceQuery, publishBody, updatePromptBody, updatePromptVersionBody } from './prompts.js'

/** What the document says about one route beyond the route table. */
export interface OperationSchemas {
  readonly summary: string
  /** The schema the handler validates the JSON body with. */
  readonly body?: z.ZodType
  /** The schema the handler validates the query string with. */
  readonly query?: z.ZodType
  /** The success answer is a bare JSON array (prompt and partial lists, as the reference answers), not the list envelope. */
  readonly bareArray?: true
}

/**
 * Route id → summary and schemas. Every route of `ADMIN_ROUTES` needs an entry, and every route
 * with a `json` body a `body` schema (test/unit/plugins/audit-openapi.test.ts checks both).
 */
export const OPERATION_SCHEMAS: Readonly<Record<string, OperationSchemas>> = {
  'admin.organisation.get': { summary: 'Get the organisation' },
  'admin.organisation.jwt.get': { summary: 'Get the JWT verification settings' },
  'admin.organisation.jwt.update': { summary: 'Set the JWT verification settings (exactly one of jwks_url and jwks)', body: jwtSettingsBody },
  'admin.organisation.jwt.delete': { summary: 'Remove the JWT verification settings' },

  'admin.workspaces.create': { summary: 'Create a workspace', body: createWorkspaceBody },
  'admin.workspaces.list': { summary: 'List workspaces', query: listWorkspacesQuery },
  'admin.workspaces.get': { summary: 'Get a workspace with its members', query: workspaceIdQuery },
  'admin.workspaces.update': { summary: 'Update a workspace', body: updateWorkspaceBody },
  'admin.workspaces.delete': { summary: 'Delete a workspace (409 while it has dependants, unless force_delete)', body: deleteWorkspaceBody, query: deleteWorkspaceQuery },
  'admin.workspaces.members.add': { summary: 'Add users to a workspace', body: addMembersBody },
  'admin.workspaces.members.list': { summary: 'List the members of a workspace', query: listMembersQuery },
  'admin.workspaces.members.get': { summary: 'Get a workspace member', query: workspaceIdQuery },
  'admin.workspaces.members.update': { summary: "Change a member's workspace role", body: updateMemberBody },
  'admin.workspaces.members.delete': { summary: 'Remove a member from a workspace (revokes their user keys there)', body: workspaceIdBody, query: workspaceIdQuery },

  'admin.invites.create': { summary: 'Invite a user to the organisation', body: createInviteBody },
  'admin.invites.list': { summary: 'List invites', query: listInvitesQuery },
  'admin.invites.get': { summary: 'Get an invite' },
  'admin.invites.delete': { summary: 'Cancel an invite' },
  'admin.invites.resend': { summary: 'Resend an invite (a new link; the old one stops working)' },
  'admin.users.list': { summary: 'List the users of the organisation', query: listUsersQuery },
  'admin.users.get': { summary: 'Get a user' },
  'admin.users.update': { summary: "Change a user's organisation role", body: updateUserBody },
  'admin.users.delete': { summary: 'Remove a user from the organisation (with their memberships and user keys)' },

  'invites.show': { summary: 'Show an invite from its link (the token is the credential)' },
  'invites.accept': { summary: 'Accept an invite: creates the user, its memberships and workspace user keys', body: acceptInviteBody },

  'api-keys.organisation-service.create': { summary: 'Create an Admin API (organisation service) key; the secret is returned only here', body: createApiKeyBody },
  'api-keys.workspace-service.create': { summary: 'Create a workspace service key; the secret is returned only here', body: createApiKeyBody },
  'api-keys.workspace-user.create': { summary: 'Create a workspace user key; the secret is returned only here', body: createApiKeyBody },
  'api-keys.list': { summary: 'List API keys (secrets masked)', query: listApiKeysQuery },
  'api-keys.get': { summary: 'Get an API key (secret masked)', query: workspaceIdQuery },
  'api-keys.update': { summary: 'Update an API key', body: updateApiKeyBody },
  'api-keys.delete': { summary: 'Delete an API key', body: workspaceIdBody, query: workspaceIdQuery },
  'api-keys.rotate': { summary: 'Rotate an API key: a new secret; the old one works until the transition ends', body: rotateApiKeyBody },

  'virtual-keys.create': {
    summary: 'Create a virtual key: a provider credential (`key`, or `keys` used in turn) stored encrypted, used with x-gateway-virtual-key',
    body: createVirtualKeyBody,
  },
  'virtual-keys.list': { summary: 'List virtual keys (provider keys never shown; masked_api_key only)', query: listVirtualKeysQuery },
  'virtual-keys.get': { summary: 'Get a virtual key (provider keys never shown; masked_api_key only)', query: virtualKeyWorkspaceQuery },
  'virtual-keys.update': {
    summary: 'Update a virtual key; a new `key`/`keys` rotates the credential for the next request, `reset_usage` reactivates it',
    body: updateVirtualKeyBody,
    query: virtualKeyWorkspaceQuery,
  },
  'virtual-keys.delete': { summary: 'Delete a virtual key (its next use answers 404)', body: workspaceIdBody, query: virtualKeyWorkspaceQuery },

  'configs.create': {
    summary: 'Create a saved routing config (version 1); config is checked against the config schema, its virtual keys, providers and custom hosts',
    body: createConfigBody,
  },
  'configs.list': { summary: 'List configs (without their config JSON)', query: listConfigsQuery },
  'configs.get': { summary: 'Get a config (id or slug) with its latest version', query: configWorkspaceQuery },
  'configs.update': { summary: 'Update a config: a new config makes version latest + 1; name, status and is_default alone make none', body: updateConfigBody, query: configWorkspaceQuery },
  'configs.delete': {
    summary: "Delete a config with its versions (409 while an API key or workspace has it as defaults.config_id, unless force=true, which clears it there)",
    body: deleteConfigBody,
    query: deleteConfigQuery,
  },
  'configs.versions.list': { summary: "A config's versions, newest first (paged)", query: listConfigVersionsQuery },

  'prompts.create': {
    summary: "Create a prompt template (version 1, published): {id, slug, version_id, object}; without collection_id it goes to the workspace's default collection",
    body: createPromptBody,
  },
  'prompts.list': { summary: 'List prompts (the model of each published version)', query: listPromptsQuery },
  'prompts.get': { summary: 'Get a prompt (id or slug) with its published version', query: promptWorkspaceQuery },
  'prompts.update': {
    summary: 'Update a prompt: version fields make a new version (patch: true copies the omitted ones from the latest); name and collection_id alone make none',
    body: updatePromptBody,
    query: promptWorkspaceQuery,
  },
  'prompts.delete': { summary: 'Delete a prompt with all its versions', body: deletePromptBody, query: promptWorkspaceQuery },
  'prompts.versions.list': { summary: "A prompt's versions, newest first (a bare array)", query: promptWorkspaceQuery, bareArray: true },
  'prompts.versions.get': { summary: 'Get one version (UUID or number) as a prompt object', query: promptWorkspaceQuery },
  'prompts.versions.update': { summary: "Set or remove a version's label (label_id); versions are otherwise immutable", body: updatePromptVersionBody, query: promptWorkspaceQuery },
  'prompts.publish': { summary: 'Publish a version: calls without a version suffix run it', body: publishBody, query: promptWorkspaceQuery },
  'prompts.partials.create': { summary: 'Create a partial (used as {{>name}}; version 1, published)', body: createPartialBody },
  'prompts.partials.list': { summary: 'List partials (a bare array)', query: listPartialsQuery, bareArray: true },
  'prompts.partials.get': { summary: 'Get a partial (id or slug) with its published version', query: partialWorkspaceQuery },
  'prompts.partials.update': { summary: 'Update a partial: a new string makes a new version; name and status change the partial', body: updatePartialBody, query: partialWorkspaceQuery },
  'prompts.partials.delete': { summary: 'Delete a partial with its versions', body: deletePartialBody, query: partialWorkspaceQuery },
  'prompts.partials.versions.list': { summary: "A partial's versions, newest first (a bare array)", query: partialWorkspaceQuery, bareArray: true },
  'prompts.partials.publish': { summary: 'Publish a partial version: prompts render it from now on', body: publishPartialBody, query: partialWorkspaceQuery },
  'labels.create': { summary: 'Create a label of a workspace (not latest, default or all digits; no @ or white space)', body: createLabelBody },
  'labels.list': { summary: 'List labels: the built-in ones (production, staging, development) and the workspace’s own', query: listLabelsQuery },
  'labels.get': { summary: 'Get a label', query: labelQuery },
  'labels.update': { summary: 'Update a label (built-in labels cannot be changed: 403)', body: updateLabelBody, query: labelQuery },
  'labels.delete': { summary: 'Delete a label; versions that carried it lose it (built-in labels cannot be deleted: 403)', body: deleteLabelBody, query: labelQuery },
  'collections.create': { summary: 'Create a collection of prompts (optionally in a parent collection)', body: createCollectionBody },
  'collections.list': { summary: 'List collections with their child collection and prompt counts', query: listCollectionsQuery },
  'collections.get': { summary: 'Get a collection with its child collections', query: collectionWorkspaceQuery },
  'collections.update': { summary: 'Rename a collection', body: updateCollectionBody, query: collectionWorkspaceQuery },
  'collections.delete': { summary: 'Delete an empty collection (409 while it holds prompts, partials or collections)', body: deleteCollectionBody, query: collectionWorkspaceQuery },

  'audit-logs.list': { summary: 'List audit log entries (state-changing Admin API requests, refused ones included)', query: listAuditLogsQuery },

  ...Object.fromEntries(
    GRAPH_NAMES.map((name) => [`analytics.graphs.${name}`, { summary: `Analytics graph "${name}": {object: "analytics-graph", summary, data_points} (costs in cents; bucket size chosen from the range)`, query: analyticsQuery }]),
  ),
  ...Object.fromEntries(
    GROUP_NAMES.filter((name) => name !== 'metadata').map((name) => [`analytics.groups.${name}`, { summary: `Analytics grouped by ${name} (a paged list of analytics-group rows)`, query: analyticsGroupQuery }]),
  ),
  'analytics.groups.metadata': { summary: 'Analytics grouped by the values of one metadata key (a paged list of analytics-group rows)', query: analyticsGroupQuery },
  'analytics.summary.cache': { summary: 'Cache summary: hits, avg_latency, total_requests, cache_speedup (%)', query: analyticsQuery },

  'feedback.create': { summary: "Rate requests by trace id (one object or an array of up to 100); the trace must be in the caller's workspace", body: createFeedbackBody },
  'feedback.update': { summary: 'Change a feedback entry (a new version of it)', body: updateFeedbackBody },

  'logs.create': { summary: 'Insert custom logs (one CustomLog or an array of up to 100); needs logs.write and completions.write; headers are not stored', body: createLogsBody },
  'logs.get': { summary: 'Get one log by request id or trace id (bodies only when stored, secrets masked; headers never)' },
  'logs.exports.create': { summary: 'Create a log export (status draft)', body: createExportBody },
  'logs.exports.list': { summary: 'List log exports', query: listExportsQuery },
  'logs.exports.get': { summary: 'Get a log export', query: workspaceIdQuery },
  'logs.exports.update': { summary: 'Change a log export that is not running (it becomes draft again)', body: updateExportBody },
  'logs.exports.start': { summary: 'Start (or re-run) a log export in the background', body: workspaceIdBody },
  'logs.exports.cancel': { summary: 'Cancel a running log export (status stopped)', body: workspaceIdBody },
  'logs.exports.download': { summary: 'A signed URL of the export file (JSON Lines), valid for exportLinkTtlMs', query: workspaceIdQuery },
  'logs.exports.file': { summary: 'The export file (JSON Lines) behind a signed URL (the signature is the credential)', query: exportFileQuery },
  'openapi.get': { summary: 'This OpenAPI document' },
}

type Json = Record<string, unknown>

const PARAMETER_DESCRIPTIONS: Readonly<Record<string, string>> = {
  workspaceId: 'Workspace slug or UUID',
  userId: 'User UUID',
  inviteId: 'Invite UUID',
  apiKeyId: 'API key UUID',
  virtualKeyId: 'Virtual key slug or UUID',
  token: 'The invite token from the invite link',
  metadataKey: 'A metadata key (letters, digits and _ . : @ / -)',
  feedbackId: 'Feedback UUID',
  logId: 'Request id (UUID) or trace id',
  exportId: 'Export UUID',
  promptId: 'Prompt slug or UUID',
  versionId: 'Prompt version UUID, or its number',
  partialId: 'Partial slug or UUID',
  labelId: 'Label UUID',
  collectionId: 'Collection slug or UUID',
  configId: 'Config slug or UUID',
}

/** Error responses: status → the catalogue's admin code and what it means here. */
const ERROR_RESPONSES: ReadonlyArray<readonly [string, AdminErrorCode, string]> = [
  ['400', 'AB01', 'Validation failed: malformed JSON, or a body or query field is invalid (the message names it)'],
  ['401', 'AB05', 'Missing, unknown or expired API key or token'],
  ['403', 'AB03', 'The caller lacks the scope, the key type or the role this operation needs'],
  ['404', 'AB08', 'The resource does not exist or belongs to another workspace'],
  ['409', 'AB07', 'Conflict: a duplicate, remaining dependants, or a concurrent change'],
  ['410', 'AB08', 'The invite was already accepted, cancelled or has expired'],
  ['413', 'AB01', 'The request body is larger than the limit'],
  ['500', 'AB04', 'Internal error'],
  ['503', 'AB04', 'Authentication is temporarily unavailable, the gateway is shutting down, or request logs are turned off (analytics, feedback, logs)'],
]

const ADMIN_ERROR_CODES = [...new Set(Object.values(ERRORS).map((spec) => spec.adminCode))].sort()

/** JSON Schema (OpenAPI 3.0 dialect) of what a client sends: the schema's input side. */
function schemaOf(schema: z.ZodType): Json {
  return z.toJSONSchema(schema, { target: 'openapi-3.0', io: 'input', unrepresentable: 'any' }) as Json
}

/** `/v1/admin/workspaces/:workspaceId` → `/v1/admin/workspaces/{workspaceId}` */
function openApiPath(pattern: string): string {
  return pattern.replace(/:([A-Za-z0-9_]+)/g, '{$1}')
}

function pathParameters(pattern: string): Json[] {
  return [...pattern.matchAll(/:([A-Za-z0-9_]+)/g)].map(([, name]) => ({
    name,
    in: 'path',
    required: true,
    description: PARAMETER_DESCRIPTIONS[name as string] ?? name,
    schema: { type: 'string' },
  }))
}

/** One `in: query` parameter per property of the query schema. */
function queryParameters(schema: z.ZodType): Json[] {
  const json = schemaOf(schema)
  const properties = (json.properties ?? {}) as Record<string, Json>
  const required = new Set((json.required ?? []) as string[])
  return Object.entries(properties).map(([name, property]) => {
    const { description, ...rest } = property
    return { name, in: 'query', required: required.has(name), ...(typeof description === 'string' ? { description } : {}), schema: rest }
  })
}

/** `organisation`, `workspaces`, `invites`, `api-keys`, ...: the route id's first meaningful part. */
function tagOf(route: RouteSpec): string {
  const parts = route.id.split('.')
  return (parts[0] === 'admin' ? parts[1] : parts[0]) ?? route.id
}

function describeAccess(route: RouteSpec): string {
  if (route.public) return 'Public: no API key (the path itself carries any credential).'
  const scopes = route.scopes.map((scope) => `\`${scope}\``).join(', ')
  const keys = route.adminKeyOnly ? 'Admin API (organisation) keys only.' : 'Admin API keys, workspace keys and JWTs (locked to their workspace).'
  return `${keys} Scopes (any one admits): ${scopes}.`
}

function errorStatuses(route: RouteSpec): string[] {
  const statuses = ['400', '500']
  if (!route.public) statuses.push('401', '403', '503')
  if (route.pattern.includes(':') || route.body !== 'none') statuses.push('404')
  if (route.audit !== null) statuses.push('409')
  if (route.id.startsWith('invites.')) statuses.push('410')
  if (route.body !== 'none') statuses.push('413')
  return statuses.sort()
}

function successResponse(route: RouteSpec): Json {
  if (OPERATION_SCHEMAS[route.id]?.bareArray === true) {
    return { description: 'The results (a bare array)', content: { 'application/json': { schema: { type: 'array', items: { type: 'object' } } } } }
  }
  const list = route.id.endsWith('.list')
  return {
    description: list ? 'One page of results' : route.method === 'DELETE' ? 'Done (an empty object)' : 'The resource',
    content: { 'application/json': { schema: list ? { $ref: '#/components/schemas/List' } : { type: 'object' } } },
  }
}

function operationOf(route: RouteSpec): Json {
  const spec = OPERATION_SCHEMAS[route.id]
  const parameters = [...pathParameters(route.pattern), ...(spec?.query === undefined ? [] : queryParameters(spec.query))]
  const responses: Json = { '200': successResponse(route) }
  for (const status of errorStatuses(route)) responses[status] = { $ref: `#/components/responses/Error${status}` }
  const operation: Json = {
    operationId: route.id,
    summary: spec?.summary ?? route.id,
    description: `${describeAccess(route)}${route.audit === null ? '' : ' Every call is recorded in the audit log.'}`,
    tags: [tagOf(route)],
    security: route.public ? [] : [{ apiKey: [] }, { bearer: [] }],
    'x-gateway-scopes': route.scopes,
    'x-gateway-admin-key-only': route.adminKeyOnly,
    ...(route.audit === null ? {} : { 'x-gateway-audit': { resource_type: route.audit.resourceType, action: route.audit.action } }),
    ...(parameters.length === 0 ? {} : { parameters }),
    responses,
  }
  if (spec?.body !== undefined && route.body !== 'none') {
    operation.requestBody = { required: route.body === 'json', content: { 'application/json': { schema: schemaOf(spec.body) } } }
  }
  return operation
}

/** The document for `routes` (every Admin API route by default). */
export function buildOpenApiDocument(routes: readonly RouteSpec[] = ADMIN_ROUTES): Json {
  const paths: Record<string, Json> = {}
  for (const route of routes) {
    const path = (paths[openApiPath(route.pattern)] ??= {})
    path[route.method.toLowerCase()] = operationOf(route)
  }
  const responses: Json = {}
  for (const [status, code, description] of ERROR_RESPONSES) {
    responses[`Error${status}`] = {
      description: `${description} (errorCode ${code})`,
      content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' }, example: { success: false, data: { message: description, errorCode: code } } } },
    }
  }
  return {
    openapi: '3.0.3',
    info: {
      title: 'Gateway Admin API',
      version: '1',
      description:
        'Control plane of the gateway: organisation, workspaces and members, users and invites, API keys, virtual keys, configs, ' +
        'prompt templates (versions, partials, labels, collections), audit logs, ' +
        'analytics, feedback, custom logs and log exports. ' +
        'Send the key in `x-gateway-api-key` (or `Authorization: Bearer`). Lists are `{object: "list", total, data}` paged with ' +
        '`current_page` (0-based) and `page_size` (users and invites: `currentPage`/`pageSize`).',
    },
    tags: [...new Set(routes.map(tagOf))].map((name) => ({ name })),
    paths,
    components: {
      securitySchemes: {
        apiKey: { type: 'apiKey', in: 'header', name: 'x-gateway-api-key', description: 'A gateway API key' },
        bearer: { type: 'http', scheme: 'bearer', description: 'A gateway API key or a JWT of the organisation (RS256)' },
      },
      schemas: {
        Error: {
          type: 'object',
          required: ['success', 'data'],
          properties: {
            success: { type: 'boolean', enum: [false] },
            data: {
              type: 'object',
              required: ['message', 'errorCode'],
              properties: { message: { type: 'string' }, errorCode: { type: 'string', enum: ADMIN_ERROR_CODES } },
            },
          },
        },
        List: {
          type: 'object',
          required: ['object', 'total', 'data'],
          properties: {
            object: { type: 'string', enum: ['list'] },
            total: { type: 'integer', minimum: 0, description: 'Matching records across all pages' },
            data: { type: 'array', items: { type: 'object' } },
          },
        },
      },
      responses,
    },
  }
}

let documentText: string | null = null

/** The serialised document, built once. */
export function openApiText(): string {
  documentText ??= JSON.stringify(buildOpenApiDocument())
  return documentText
}

const HEADERS: ReadonlyArray<readonly [string, string]> = [
  ['content-type', 'application/json'],
  ['cache-control', 'public, max-age=300'],
]

export const publicOpenApiHandlers: PublicHandlerMap = {
  'openapi.get': async (): Promise<Reply> => ({ status: 200, headers: HEADERS, body: openApiText() }),
}
