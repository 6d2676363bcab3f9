/**
 * Configs (`/v1/configs…`, API.md §4 and §5, reference/admin-api.md §6): a workspace's saved routing
 * rules, kept in numbered versions. The data plane (`x-gateway-config: <slug>`, or an API key's or
 * workspace's `defaults.config_id`) routes by the latest version, read with `AdminStore.findConfig`;
 * this file only stores them.
 *
 * - Create: `name`, `config` (a JSON object) and optionally `is_default` (0/1 or a boolean; the
 *   reference's `isDefault` is read the same way) and, with an Admin API key, `workspace_id`.
 *   Version 1 is made; the answer is `{id, slug, version_id, object: "config"}`, the slug
 *   `pc-<name>-<6 hex>`.
 * - Update: `name`, `status` (`active`/`archived`), `is_default` and `config`; every update that
 *   sends `config` makes version latest + 1 (the one the data plane uses from then on), one without
 *   it makes none. The answer is the updated config.
 * - `config` is checked with the one schema of core/routing-config.ts (`checkRoutingConfig(…,
 *   'saved')`): a failure is 400 AB01 naming every issue by its path (`config.targets[1].retry.
 *   attempts: …`, `param` the first). It is stored as the JSON text of the object as sent, at most
 *   `MAX_CONFIG_BYTES`. On top of the schema, against this workspace: every `provider` must be in
 *   the registry; every `custom_host` (a saved config may pair one with `virtual_key`) must pass the
 *   custom-host allow-list the virtual keys use, and a provider without a public endpoint needs one;
 *   every `virtual_key` must name a virtual key of the config's workspace (400 naming the path, the
 *   same answer whether the key is unknown or another workspace's). Pointing a virtual key at a
 *   `custom_host` other than the key's own sends its stored credential there, so it also needs the
 *   `virtual_keys.update` scope (else 403), as changing the key's own host would.
 * - Marking a config `is_default` takes the mark off the workspace's previous default in the same
 *   transaction (at most one per workspace).
 * - Delete is refused (409 `GW_ADMIN_DEPENDANTS`) while an API key or a workspace of the
 *   organisation names the config (by slug or id) as its `defaults.config_id`, unless `?force=true`:
 *   then their `config_id` is cleared in the same transaction as the delete.
 * - Workspaces as for virtual keys and prompts: an Admin API key names `workspace_id` on create (and
 *   may on the other routes, where it must be the config's workspace, else 404); a workspace key or
 *   JWT is locked to its workspace; another workspace's config is 404, never revealed; creating,
 *   changing and deleting need a workspace admin or manager (members list and read).
 * Every change is stored with its audit entry in one transaction and then published on the
 * `configs` channel (the config UUID), so every instance drops its compiled plan at once.
 */
import { randomUUID } from 'node:crypto'
import { z } from 'zod'
import type { ConfigRecord, ConfigVersionRecord, RequestDefaults, VirtualKeyRecord, WorkspaceRecord } from '../../core/admin-records.js'
import { CHANGE_CHANNELS } from '../../core/channels.js'
import type { Principal } from '../../core/context.js'
import { ERRORS, GatewayError, gatewayError, isGatewayError } from '../../core/errors.js'
import { jsonReply, type Reply } from '../../core/plugin.js'
import { checkRoutingConfig, formatConfigPath, MAX_CONFIG_BYTES, type ConfigNodeInput } from '../../core/routing-config.js'
import { canManage, listScope, pathResourceWorkspace, targetWorkspace } from './access.js'
import { defaultsOf } from './inputs.js'
import { newSlug } from './prompt-templates.js'
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
  type HandlerMap,
} from './request.js'
import { snakePaging, workspaceIdBody, workspaceIdField, workspaceIdQuery, type requestDefaults } from './schemas.js'
import { listView } from './views.js'
import { publishKeyChanges } from './workspaces.js'

// ---------------------------------------------------------------------------------------------
// Schemas (also used by the OpenAPI document)

const configName = z.string().trim().min(1).max(200)

const configJson = z
  .record(z.string(), z.unknown())
  .describe(
    'The routing config (API.md §4): strategy {mode, on_status_codes, conditions, default, cb_config}, targets, provider, virtual_key, ' +
      `custom_host, override_params, retry, request_timeout, cache, forward_headers; no api_key; at most ${MAX_CONFIG_BYTES} bytes of JSON`,
  )

const defaultFlag = z.union([z.literal(0), z.literal(1), z.boolean()])

export const createConfigBody = z
  .object({
    workspace_id: workspaceIdField.optional(),
    name: configName,
    config: configJson,
    is_default: defaultFlag.optional().describe("1: the workspace's default config (the previous default loses the mark)"),
    isDefault: defaultFlag.optional().describe('The reference system’s spelling of is_default'),
  })
  .strict()

export const updateConfigBody = z
  .object({
    workspace_id: workspaceIdField.optional(),
    name: configName.optional(),
    config: configJson.optional().describe('A new config: makes version latest + 1, which requests are routed by from then on'),
    status: z.enum(['active', 'archived']).optional(),
    is_default: defaultFlag.optional(),
    isDefault: defaultFlag.optional(),
  })
  .strict()

export const listConfigsQuery = z.object({ ...snakePaging, workspace_id: workspaceIdField.optional() })

export const listConfigVersionsQuery = z.object({ ...snakePaging, workspace_id: workspaceIdField.optional() })

export const configWorkspaceQuery = workspaceIdQuery

export const deleteConfigBody = workspaceIdBody

export const deleteConfigQuery = z.object({
  workspace_id: workspaceIdField.optional(),
  force: z.enum(['true', 'false']).optional().describe("true: also clear the config from every API key's and workspace's defaults.config_id"),
})

// ---------------------------------------------------------------------------------------------
// Views

function configFields(config: ConfigRecord, workspaceSlug: string): Record<string, unknown> {
  return {
    object: 'config',
    id: config.id,
    slug: config.slug,
    name: config.name,
    organisation_id: config.organisationId,
    workspace_id: workspaceSlug,
    is_default: config.isDefault ? 1 : 0,
    status: config.status,
    owner_id: config.ownerId,
    updated_by: config.updatedBy,
    created_at: config.createdAt,
    last_updated_at: config.lastUpdatedAt,
  }
}

/** The config with its latest version (what requests are routed by). */
export function configView(config: ConfigRecord, workspaceSlug: string): Record<string, unknown> {
  return { ...configFields(config, workspaceSlug), config: JSON.parse(config.config) as unknown, version_id: config.versionId, version: config.version }
}

/** One version, as a config object carrying that version's JSON. */
function versionView(config: ConfigRecord, version: ConfigVersionRecord, workspaceSlug: string): Record<string, unknown> {
  return {
    ...configFields(config, workspaceSlug),
    config: JSON.parse(version.config) as unknown,
    version_id: version.id,
    version: version.version,
    created_by: version.createdBy,
    created_at: version.createdAt,
  }
}

// ---------------------------------------------------------------------------------------------
// Checks

/** `['targets', 1]` + `retry.attempts` → `config.targets[1].retry.attempts`: a path in the request body. */
function bodyPath(path: string): string {
  return path.length === 0 ? 'config' : `config.${path}`
}

/** Who acted, as records name it: the user, else the API key (a JWT's subject). */
function actorOf(principal: Principal): string {
  return principal.userId ?? principal.keyId
}

/** `is_default` / `isDefault` as sent → `true`, `false` or `undefined`. */
function defaultOf(input: { is_default?: 0 | 1 | boolean | undefined; isDefault?: 0 | 1 | boolean | undefined }): boolean | undefined {
  const flag = input.is_default ?? input.isDefault
  return flag === undefined ? undefined : flag === 1 || flag === true
}

/**
 * The JSON text to store for a config as sent (`raw`, the body's own value, so member names such as
 * `__proto__` stay as sent), or the error naming the first problem: size, the schema, then what
 * the schema cannot know (providers, custom hosts, virtual keys of the workspace).
 */
async function checkedConfig(request: AdminRequest, raw: unknown, workspaceId: string): Promise<string | GatewayError> {
  const text = JSON.stringify(raw)
  if (Buffer.byteLength(text) > MAX_CONFIG_BYTES) return invalid(`config: must be at most ${MAX_CONFIG_BYTES} bytes of JSON`, 'config')
  const check = checkRoutingConfig(raw, 'saved')
  if (!check.ok) {
    const [first] = check.issues
    return invalid(check.issues.map((issue) => `${bodyPath(issue.path)}: ${issue.message}`).join('; '), bodyPath(first?.path ?? ''))
  }
  const refused = await checkTargets(request, check.config, [], null, workspaceId)
  return refused ?? text
}

/**
 * Walks the checked config: each node's provider exists, its custom host (its own, else the one it
 * inherits) is allowed, and a provider with no public endpoint has one; each virtual key is one of
 * the workspace's, and is pointed at a host other than its own only by a caller holding
 * `virtual_keys.update`. At most `MAX_CONFIG_TARGETS` nodes, so a bounded number of look-ups.
 */
async function checkTargets(
  request: AdminRequest,
  node: ConfigNodeInput,
  path: PropertyKey[],
  inheritedHost: string | null,
  workspaceId: string,
): Promise<GatewayError | null> {
  const { deps, principal } = request
  const at = (field: string): string => bodyPath(formatConfigPath([...path, field]))
  let host = inheritedHost
  if (node.custom_host !== undefined) {
    const check = await deps.registry.checkCustomHost(node.custom_host)
    if (!check.ok) return invalid(`${at('custom_host')}: not allowed: ${check.reason}`, at('custom_host'))
    host = check.origin + check.basePath
  }
  if (node.provider !== undefined) {
    const spec = deps.registry.get(node.provider)
    if (spec === undefined) return invalid(`${at('provider')}: unknown provider "${node.provider.slice(0, 100)}"`, at('provider'))
    if (node.targets === undefined && host === null && spec.baseUrl.length === 0) {
      return invalid(`${at('custom_host')}: required for provider "${node.provider}", which has no public endpoint`, at('custom_host'))
    }
  }
  if (node.virtual_key !== undefined) {
    const key = await workspaceVirtualKey(deps, principal, node.virtual_key, workspaceId)
    // The same answer for an unknown key and another workspace's: nothing is revealed.
    if (key === null) return invalid(`${at('virtual_key')}: no virtual key "${node.virtual_key.slice(0, 200)}" in this workspace`, at('virtual_key'))
    if (host !== null && host !== key.customHost && !principal.scopes.has('virtual_keys.update')) {
      return forbidden(
        `${at('custom_host')}: pointing virtual key "${key.slug}" at another host sends its stored credential there, which needs the virtual_keys.update scope`,
      )
    }
  }
  const targets = node.targets ?? []
  for (let index = 0; index < targets.length; index++) {
    const refused = await checkTargets(request, targets[index] as ConfigNodeInput, [...path, 'targets', index], host, workspaceId)
    if (refused !== null) return refused
  }
  return null
}

/** The virtual key `idOrSlug` names if it belongs to `workspaceId`, else `null`. */
async function workspaceVirtualKey(deps: AdminDeps, principal: Principal, idOrSlug: string, workspaceId: string): Promise<VirtualKeyRecord | null> {
  const key = await deps.store.findVirtualKey(principal.organisationId, idOrSlug)
  return key !== null && key.workspaceId === workspaceId ? key : null
}

/**
 * The slug to store as a `defaults.config_id` (API keys, workspaces): the config `ref` (slug or
 * UUID) names must belong to `workspaceId` (any workspace of the organisation for `null`, an
 * organisation key's defaults), else 400 naming `field`, the same answer whether the config is
 * unknown or another workspace's.
 */
export async function defaultConfigRef(
  deps: AdminDeps,
  principal: Principal,
  ref: string,
  workspaceId: string | null,
  field = 'defaults.config_id',
): Promise<string | GatewayError> {
  const config = await deps.store.findConfig(principal.organisationId, ref)
  if (config === null || (workspaceId !== null && config.workspaceId !== workspaceId)) {
    return invalid(`${field}: no config "${ref.slice(0, 200)}" in this workspace`, field)
  }
  return config.slug
}

/**
 * `defaults` of an API key or workspace as sent, with its `config_id` checked and stored as the
 * config's slug (`defaultConfigRef`); `null` for none.
 */
export async function checkedDefaults(
  deps: AdminDeps,
  principal: Principal,
  input: z.output<typeof requestDefaults> | null | undefined,
  workspaceId: string | null,
): Promise<RequestDefaults | null | GatewayError> {
  const defaults = defaultsOf(input)
  if (defaults === null || defaults.configId === null) return defaults
  const slug = await defaultConfigRef(deps, principal, defaults.configId, workspaceId)
  return slug instanceof GatewayError ? slug : { ...defaults, configId: slug }
}

/** Drops the compiled plans of configs on every instance. Sent after the commit. */
function publishConfigChanges(deps: AdminDeps, ids: ReadonlyArray<string | null | undefined>): void {
  for (const id of ids) if (typeof id === 'string') deps.notifier.publish(CHANGE_CHANNELS.configs, id)
}

/** The workspace's default config other than `except`, or `null`. */
async function currentDefault(deps: AdminDeps, organisationId: string, workspaceId: string, except: string | null): Promise<ConfigRecord | null> {
  const page = await deps.store.listConfigs(organisationId, { workspaceId, isDefault: true }, { offset: 0, limit: 2 })
  return page.items.find((config) => config.id !== except) ?? null
}

interface Found {
  readonly config: ConfigRecord
  readonly workspace: WorkspaceRecord
}

/** The config of the path (UUID or slug) if the caller may see it, and with `change` also change it (see `pathResourceWorkspace`). */
async function visibleConfig(request: AdminRequest, namedInBody: string | undefined, change = false): Promise<Found | GatewayError> {
  const config = await request.deps.store.findConfig(request.principal.organisationId, request.ctx.params.configId ?? '')
  const workspace = await pathResourceWorkspace(request, config, namedInBody, 'Config', change ? 'configs' : null)
  return workspace instanceof GatewayError ? workspace : { config: config!, workspace }
}

/** The config of the path if the caller may also change it (403 for read-only members). */
function changeableConfig(request: AdminRequest, namedInBody: string | undefined): Promise<Found | GatewayError> {
  return visibleConfig(request, namedInBody, true)
}

/** The body's own `config` value (not zod's copy), so the stored JSON is the object as sent. */
function rawConfig(request: AdminRequest): unknown {
  return (request.ctx.body as { config?: unknown } | null)?.config
}

// ---------------------------------------------------------------------------------------------
// Handlers

/** Slug collisions (24 random bits within one organisation) and a concurrent default are retried. */
const CREATE_ATTEMPTS = 3

function retryable(error: unknown): boolean {
  return isGatewayError(error) && error.code === ERRORS.GW_ADMIN_CONFLICT.code && (error.param === 'slug' || error.param === 'isDefault')
}

async function createConfig(request: AdminRequest): Promise<Reply | GatewayError> {
  const body = parseBody(request.ctx, createConfigBody)
  if (!body.ok) return body.error
  const { deps, principal, ctx } = request
  const input = body.value
  const target = await targetWorkspace(deps, principal, input.workspace_id)
  if (!target.ok) return target.missing ? invalid('workspace_id: required with an Admin API key', 'workspace_id') : notFound('Workspace')
  const workspace = target.workspace
  noteAction(ctx, { workspaceId: workspace.id })
  if (!(await canManage(deps, principal, workspace))) return forbidden('Only workspace admins and managers can create configs')
  const text = await checkedConfig(request, rawConfig(request), workspace.id)
  if (text instanceof GatewayError) return text

  const now = nowIso(deps)
  const actor = actorOf(principal)
  const isDefault = defaultOf(input) ?? false
  const first: ConfigVersionRecord = {
    id: randomUUID(),
    configId: randomUUID(),
    organisationId: principal.organisationId,
    workspaceId: workspace.id,
    version: 1,
    config: text,
    createdBy: actor,
    createdAt: now,
  }
  noteAction(ctx, { resourceId: first.configId })
  let record: ConfigRecord | null = null
  let unmarked: ConfigRecord | null = null
  for (let attempt = 1; ; attempt++) {
    // Read again on a retry: another config may have become the default meanwhile.
    const previous = isDefault ? await currentDefault(deps, principal.organisationId, workspace.id, null) : null
    unmarked = previous === null ? null : { ...previous, isDefault: false, updatedBy: actor, lastUpdatedAt: nowIso(deps, previous.lastUpdatedAt) }
    const config: ConfigRecord = {
      id: first.configId,
      slug: newSlug(input.name, 'config', 'pc-'),
      organisationId: principal.organisationId,
      workspaceId: workspace.id,
      name: input.name,
      config: text,
      version: 1,
      versionId: first.id,
      isDefault,
      status: 'active',
      ownerId: actor,
      updatedBy: actor,
      createdAt: now,
      lastUpdatedAt: now,
    }
    try {
      await commit(request, 200, async (writer) => {
        if (previous !== null && unmarked !== null) requireApplied(await writer.updateConfig(unmarked, previous.lastUpdatedAt))
        await writer.insertConfig(config, first)
      })
      record = config
      break
    } catch (error) {
      if (!retryable(error) || attempt >= CREATE_ATTEMPTS) throw error
    }
  }
  publishConfigChanges(deps, [record.id, unmarked?.id])
  return jsonReply(200, { id: record.id, slug: record.slug, version_id: record.versionId, object: 'config' })
}

async function listConfigs(request: AdminRequest): Promise<Reply | GatewayError> {
  const query = parseQuery(request.ctx, listConfigsQuery)
  if (!query.ok) return query.error
  const { deps, principal } = request
  const { current_page, page_size, workspace_id } = query.value
  const scope = await listScope(request, workspace_id)
  if (scope instanceof GatewayError) return scope
  const { workspaceId, slugs } = scope
  const page = await deps.store.listConfigs(principal.organisationId, workspaceId === undefined ? {} : { workspaceId }, pageOf(current_page, page_size))
  const data = []
  for (const config of page.items) {
    let slug = slugs.get(config.workspaceId)
    if (slug === undefined) {
      slug = (await deps.store.findWorkspace(principal.organisationId, config.workspaceId))?.slug ?? config.workspaceId
      slugs.set(config.workspaceId, slug)
    }
    data.push({ ...configFields(config, slug), version_id: config.versionId, version: config.version })
  }
  return jsonReply(200, listView(page.total, data))
}

async function getConfig(request: AdminRequest): Promise<Reply | GatewayError> {
  const found = await visibleConfig(request, undefined)
  if (found instanceof GatewayError) return found
  return jsonReply(200, configView(found.config, found.workspace.slug))
}

async function updateConfig(request: AdminRequest): Promise<Reply | GatewayError> {
  const body = parseBody(request.ctx, updateConfigBody)
  if (!body.ok) return body.error
  const input = body.value
  const found = await changeableConfig(request, input.workspace_id)
  if (found instanceof GatewayError) return found
  const { deps, principal } = request
  const { config, workspace } = found
  const actor = actorOf(principal)

  let version: ConfigVersionRecord | null = null
  if (input.config !== undefined) {
    const text = await checkedConfig(request, rawConfig(request), workspace.id)
    if (text instanceof GatewayError) return text
    version = {
      id: randomUUID(),
      configId: config.id,
      organisationId: config.organisationId,
      workspaceId: config.workspaceId,
      version: config.version + 1,
      config: text,
      createdBy: actor,
      createdAt: nowIso(deps),
    }
  }
  const isDefault = defaultOf(input) ?? config.isDefault
  const previous = isDefault && !config.isDefault ? await currentDefault(deps, principal.organisationId, workspace.id, config.id) : null
  const unmarked = previous === null ? null : { ...previous, isDefault: false, updatedBy: actor, lastUpdatedAt: nowIso(deps, previous.lastUpdatedAt) }
  const updated: ConfigRecord = {
    ...config,
    name: input.name ?? config.name,
    status: input.status ?? config.status,
    isDefault,
    ...(version === null ? {} : { config: version.config, version: version.version, versionId: version.id }),
    updatedBy: actor,
    lastUpdatedAt: nowIso(deps, config.lastUpdatedAt),
  }
  await commit(request, 200, async (writer) => {
    // The mark comes off the old default first: one default per workspace at every step.
    if (previous !== null && unmarked !== null) requireApplied(await writer.updateConfig(unmarked, previous.lastUpdatedAt))
    // The optimistic check before the version: of two concurrent updates only one makes version n + 1.
    requireApplied(await writer.updateConfig(updated, config.lastUpdatedAt))
    if (version !== null) await writer.insertConfigVersion(version)
  })
  publishConfigChanges(deps, [config.id, unmarked?.id])
  return jsonReply(200, configView(updated, workspace.slug))
}

async function deleteConfig(request: AdminRequest): Promise<Reply | GatewayError> {
  const body = parseBody(request.ctx, deleteConfigBody)
  if (!body.ok) return body.error
  const query = parseQuery(request.ctx, deleteConfigQuery)
  if (!query.ok) return query.error
  const found = await changeableConfig(request, body.value.workspace_id)
  if (found instanceof GatewayError) return found
  const { deps, principal } = request
  const { config } = found
  const dependants = await deps.store.configDependants(principal.organisationId, [config.id, config.slug])
  const users = dependants.apiKeys.length + dependants.workspaces.length
  if (users > 0 && query.value.force !== 'true') {
    const named = [
      ...(dependants.apiKeys.length === 0 ? [] : [`${dependants.apiKeys.length} API key${dependants.apiKeys.length === 1 ? '' : 's'}`]),
      ...(dependants.workspaces.length === 0 ? [] : [`${dependants.workspaces.length} workspace${dependants.workspaces.length === 1 ? '' : 's'}`]),
    ]
    return gatewayError(
      ERRORS.GW_ADMIN_DEPENDANTS,
      `Unable to delete: the config is the default config (defaults.config_id) of ${named.join(' and ')}. Clear it there first, or send ?force=true to clear it and delete`,
    )
  }
  const clearedKeys = dependants.apiKeys.map((key) => ({
    before: key,
    after: { ...key, defaults: key.defaults === null ? null : { ...key.defaults, configId: null }, lastUpdatedAt: nowIso(deps, key.lastUpdatedAt) },
  }))
  const clearedWorkspaces = dependants.workspaces.map((space) => ({
    before: space,
    after: { ...space, defaults: space.defaults === null ? null : { ...space.defaults, configId: null }, lastUpdatedAt: nowIso(deps, space.lastUpdatedAt) },
  }))
  await commit(request, 200, async (writer) => {
    for (const { before, after } of clearedKeys) requireApplied(await writer.updateApiKey(after, before.lastUpdatedAt))
    for (const { before, after } of clearedWorkspaces) requireApplied(await writer.updateWorkspace(after, before.lastUpdatedAt))
    requireApplied(await writer.deleteConfig(principal.organisationId, config.id))
  })
  publishConfigChanges(deps, [config.id])
  publishKeyChanges(
    deps,
    clearedKeys.map(({ after }) => after),
  )
  for (const { after } of clearedWorkspaces) deps.notifier.publish(CHANGE_CHANNELS.workspaces, after.id)
  return jsonReply(200, {})
}

/** The config's versions, newest first, paged. */
async function listConfigVersions(request: AdminRequest): Promise<Reply | GatewayError> {
  const query = parseQuery(request.ctx, listConfigVersionsQuery)
  if (!query.ok) return query.error
  const found = await visibleConfig(request, undefined)
  if (found instanceof GatewayError) return found
  const page = await request.deps.store.listConfigVersions(found.config.id, pageOf(query.value.current_page, query.value.page_size))
  return jsonReply(200, listView(page.total, page.items.map((version) => versionView(found.config, version, found.workspace.slug))))
}

export const configHandlers: HandlerMap = {
  'configs.create': createConfig,
  'configs.list': listConfigs,
  'configs.get': getConfig,
  'configs.update': updateConfig,
  'configs.delete': deleteConfig,
  'configs.versions.list': listConfigVersions,
}
