/**
 * Virtual keys (`/v1/virtual-keys…`, API.md §5): stored provider credentials that clients use by
 * slug (`x-gateway-virtual-key`) instead of sending the provider key.
 *
 * Rules on top of the route's scope check (`virtual_keys.*`):
 * - an Admin API key names the workspace with `workspace_id` (body on create; on get, update and
 *   delete optional, in the query or, for update and delete, the body, and then it must be the
 *   virtual key's workspace, else 404: access.ts `checkNamedWorkspace`); a workspace key or JWT is
 *   locked to its workspace, and another workspace's virtual key is reported as not found;
 * - creating, changing and deleting need a workspace admin or manager (members are read-only);
 * - the provider key (`key`, or `keys`: several keys of the same provider used in turn, round
 *   robin) is write-only: it is sealed with the master key (AES-256-GCM) before it reaches the
 *   store, and responses show only `masked_api_key` and `keys_count`. `model_config` is sealed too
 *   (it may carry provider secrets) and shown with secret-looking fields masked;
 * - every change and delete is published on the `virtual-keys` channel, so each instance drops its
 *   cached copy at once: a rotated `key` is used by the next request, with no client change;
 * - changing where the stored key goes (`custom_host`, `null` included, or `provider`) requires the
 *   provider key (`key` or `keys`) in the same update, else 400 AB01: whoever may edit a key can
 *   send it elsewhere only with a credential they already hold. A `custom_host` naming the same
 *   endpoint as the stored one (after normalisation) is not a change;
 * - `custom_host` is stored as the custom-host guard normalises it (`HTTP://LocalHost.:8080/v1/` →
 *   `http://localhost:8080/v1`), the form every request is then sent to.
 */
import { randomBytes, randomUUID } from 'node:crypto'
import { z } from 'zod'
import type { VirtualKeyRecord, WorkspaceRecord } from '../../core/admin-records.js'
import { maskSecrets } from '../../core/audit.js'
import type { BudgetUsage } from '../../core/budgets.js'
import { CHANGE_CHANNELS } from '../../core/channels.js'
import { ERRORS, GatewayError, isGatewayError } from '../../core/errors.js'
import { jsonReply, type Reply } from '../../core/plugin.js'
import { maskSecret } from '../../core/secrets.js'
import { canManage, checkNamedWorkspace, targetWorkspace, visibleWorkspace } from './access.js'
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
  type HandlerMap,
} from './request.js'
import { isoDateTime, snakePaging, usageLimitRule, workspaceIdBody, workspaceIdField, workspaceIdQuery } from './schemas.js'
import { listView, rateLimitsView, usageLimitView } from './views.js'

// ---------------------------------------------------------------------------------------------
// Schemas (also used by the OpenAPI document)

/** Sealed `model_config` must stay a small settings object, not a data store. */
const MAX_MODEL_CONFIG_CHARS = 64 * 1024
/** Provider keys a virtual key may rotate through. */
const MAX_PROVIDER_KEYS = 100

const vkName = z.string().trim().min(1).max(200)
const providerKey = z.string().trim().min(1).max(16_384)
const futureDate = isoDateTime.refine((value) => Date.parse(value) > Date.now(), 'must be in the future')

/** Virtual keys take per-minute, per-hour and per-day limits (API.md §6; `rps`/`rpw` are API-key only). */
export const virtualKeyRateLimitRule = z
  .object({
    type: z.enum(['requests', 'tokens']),
    unit: z.enum(['rpm', 'rph', 'rpd']),
    value: z.number().int().min(0),
  })
  .strict()

const modelConfig = z
  .record(z.string().max(128), z.unknown())
  .refine((value) => JSON.stringify(value).length <= MAX_MODEL_CONFIG_CHARS, `must be at most ${MAX_MODEL_CONFIG_CHARS} characters of JSON`)

const customHost = z.string().trim().min(1).max(2048)

const virtualKeyFields = {
  key: providerKey.optional().describe('The provider API key (write-only; stored encrypted)'),
  keys: z
    .array(providerKey)
    .min(1)
    .max(MAX_PROVIDER_KEYS)
    .optional()
    .describe('Several keys of the same provider, used in turn (round robin); instead of `key` (write-only; stored encrypted)'),
  note: z.string().max(2000).nullable().optional(),
  usage_limits: usageLimitRule.nullable().optional(),
  rate_limits: z.array(virtualKeyRateLimitRule).max(10).nullable().optional(),
  expires_at: futureDate.nullable().optional(),
  model_config: modelConfig.nullable().optional().describe('Provider settings (Azure resource/deployment/api-version, AWS region, ...); stored encrypted'),
  custom_host: customHost.nullable().optional().describe('A self-hosted or private endpoint (checked against GATEWAY_ALLOWED_CUSTOM_HOSTS)'),
}

/** `key` and `keys` are alternatives. */
function notBothKeyAndKeys(body: { key?: string | undefined; keys?: string[] | undefined }): boolean {
  return body.key === undefined || body.keys === undefined
}
const NOT_BOTH = { message: 'send key or keys, not both', path: ['keys'] }

export const createVirtualKeyBody = z
  .object({
    name: vkName,
    provider: z.string().trim().min(1).max(100),
    workspace_id: workspaceIdField.optional(),
    ...virtualKeyFields,
  })
  .strict()
  .refine(notBothKeyAndKeys, NOT_BOTH)

export const updateVirtualKeyBody = z
  .object({
    workspace_id: workspaceIdField.optional(),
    name: vkName.optional(),
    provider: z
      .string()
      .trim()
      .min(1)
      .max(100)
      .optional()
      .describe('Moves the key to another provider; requires `key` or `keys` in the same update'),
    ...virtualKeyFields,
    /** Puts an exhausted virtual key back to work. */
    reset_usage: z.boolean().optional(),
  })
  .strict()
  .refine(notBothKeyAndKeys, NOT_BOTH)

export const listVirtualKeysQuery = z.object({
  ...snakePaging,
  workspace_id: workspaceIdField.optional(),
})

/** `workspace_id` an Admin API key may add to get, update and delete (checked, not a selector). */
export const virtualKeyWorkspaceQuery = workspaceIdQuery

// ---------------------------------------------------------------------------------------------
// Helpers

/** `My OpenAI key!` → `my-openai-key` (at most 20 characters). */
function slugPart(name: string): string {
  const slug = name.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 20).replace(/-+$/, '')
  return slug.length > 0 ? slug : 'virtual-key'
}

function newSlug(name: string): string {
  return `${slugPart(name)}-${randomBytes(3).toString('hex')}`
}

/** Drops cached copies of a virtual key on every instance (and any "unknown slug" memory). */
function publishChange(deps: AdminDeps, id: string): void {
  deps.notifier.publish(CHANGE_CHANNELS.virtualKeys, id)
}

/**
 * The provider exists, and the endpoint is reachable: its public one or an allowed custom host.
 * Answers the custom host to store, normalised as the guard reads it (origin + base path).
 */
async function checkEndpoint(deps: AdminDeps, provider: string, host: string | null): Promise<GatewayError | { readonly customHost: string | null }> {
  const spec = deps.registry.get(provider)
  if (spec === undefined) return invalid(`provider: unknown provider "${provider.slice(0, 100)}"`, 'provider')
  if (host !== null) {
    const check = await deps.registry.checkCustomHost(host)
    if (!check.ok) return invalid(`custom_host: not allowed: ${check.reason}`, 'custom_host')
    return { customHost: check.origin + check.basePath }
  }
  if (spec.baseUrl.length === 0) return invalid(`custom_host: required for provider "${provider}", which has no public endpoint`, 'custom_host')
  return { customHost: null }
}

/**
 * Whether two custom host values name the same endpoint: scheme, host (lower case, without trailing
 * dots, IPv4 in any spelling the URL parser reads), port and path without trailing slashes.
 */
function sameEndpoint(a: string | null, b: string | null): boolean {
  if (a === null || b === null) return a === b
  return endpointOf(a) === endpointOf(b)
}

function endpointOf(url: string): string {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    return url
  }
  const host = parsed.host.replace(/\.+(?=:\d+$|$)/, '')
  return `${parsed.protocol}//${parsed.username}:${parsed.password}@${host}${parsed.pathname.replace(/\/+$/, '')}${parsed.search}${parsed.hash}`
}

function sealKeys(deps: AdminDeps, keys: readonly string[]): { sealedKeys: string[]; maskedKey: string | null } {
  return { sealedKeys: keys.map((key) => deps.cipher.seal(key)), maskedKey: keys[0] === undefined ? null : maskSecret(keys[0]) }
}

function sealModelConfig(deps: AdminDeps, config: Record<string, unknown> | null | undefined): string | null {
  return config === null || config === undefined ? null : deps.cipher.seal(JSON.stringify(config))
}

/** `key` or `keys` of a body, or `undefined` when it sends neither. */
function providerKeysOf(input: { key?: string | undefined; keys?: string[] | undefined }): string[] | undefined {
  if (input.keys !== undefined) return input.keys
  return input.key === undefined ? undefined : [input.key]
}

/** The response object. Never contains a provider key: only its masked form and how many there are. */
export function virtualKeyView(
  deps: AdminDeps,
  key: VirtualKeyRecord,
  workspaceSlug: string,
  nowMs: number,
  usage?: readonly BudgetUsage[],
): Record<string, unknown> {
  const expired = key.expiresAt !== null && Date.parse(key.expiresAt) <= nowMs
  return {
    object: 'virtual-key',
    id: key.id,
    slug: key.slug,
    name: key.name,
    note: key.note,
    provider: key.provider,
    ai_provider_name: key.provider,
    masked_api_key: key.maskedKey,
    keys_count: key.sealedKeys.length,
    custom_host: key.customHost,
    model_config: key.sealedModelConfig === null ? null : maskSecrets(JSON.parse(deps.cipher.open(key.sealedModelConfig))),
    usage_limits: key.usageLimits === null ? null : usageLimitView(key.usageLimits, usage?.[0]),
    rate_limits: rateLimitsView(key.rateLimits),
    status: expired ? 'expired' : usage?.[0]?.exhausted === true ? 'exhausted' : key.status,
    expires_at: key.expiresAt,
    workspace_id: workspaceSlug,
    created_at: key.createdAt,
    last_updated_at: key.lastUpdatedAt,
  }
}

/** The budget state of the virtual key's usage limit (see `budgetUsage`). */
function keyUsage(deps: AdminDeps, key: VirtualKeyRecord): Promise<readonly BudgetUsage[] | undefined> {
  return budgetUsage(deps, { kind: 'virtual-key', id: key.id }, key.workspaceId, key.usageLimits === null ? [] : [key.usageLimits])
}

interface Found {
  readonly key: VirtualKeyRecord
  readonly workspace: WorkspaceRecord
}

/**
 * The virtual key of the path if the caller may see it (404 otherwise): a workspace caller only
 * its workspace's, an Admin API key any; either within the `workspace_id` it names (body or query),
 * if it names one.
 */
async function visibleKey(request: AdminRequest, namedInBody: string | undefined): Promise<Found | GatewayError> {
  const { deps, principal, ctx } = request
  const key = await deps.store.findVirtualKey(principal.organisationId, ctx.params.virtualKeyId ?? '')
  if (key === null) return notFound('Virtual key')
  if (principal.workspaceId !== null && key.workspaceId !== principal.workspaceId) return notFound('Virtual key')
  const workspace = await deps.store.findWorkspace(principal.organisationId, key.workspaceId)
  if (workspace === null) return notFound('Virtual key')
  const misnamed = await checkNamedWorkspace(request, namedInBody, workspace.id, 'Virtual key')
  if (misnamed !== null) return misnamed
  noteAction(ctx, { workspaceId: key.workspaceId, resourceId: key.id })
  return { key, workspace }
}

/** The virtual key of the path if the caller may also change it (403 for read-only members). */
async function changeableKey(request: AdminRequest, namedInBody: string | undefined): Promise<Found | GatewayError> {
  const found = await visibleKey(request, namedInBody)
  if (found instanceof GatewayError) return found
  if (!(await canManage(request.deps, request.principal, found.workspace))) return forbidden('Only workspace admins and managers can change virtual keys')
  return found
}

// ---------------------------------------------------------------------------------------------
// Handlers

/** Slug collisions (24 random bits within one organisation) are retried with a new slug. */
const SLUG_ATTEMPTS = 3

async function createVirtualKey(request: AdminRequest): Promise<Reply | GatewayError> {
  const body = parseBody(request.ctx, createVirtualKeyBody)
  if (!body.ok) return body.error
  const { deps, principal, ctx } = request
  const input = body.value
  const target = await targetWorkspace(deps, principal, input.workspace_id)
  if (!target.ok) return target.missing ? invalid('workspace_id: required with an Admin API key', 'workspace_id') : notFound('Workspace')
  const workspace = target.workspace
  noteAction(ctx, { workspaceId: workspace.id })
  if (!(await canManage(deps, principal, workspace))) return forbidden('Only workspace admins and managers can create virtual keys')
  const endpoint = await checkEndpoint(deps, input.provider, input.custom_host ?? null)
  if (endpoint instanceof GatewayError) return endpoint

  const now = nowIso(deps)
  const base: VirtualKeyRecord = {
    id: randomUUID(),
    slug: newSlug(input.name),
    organisationId: principal.organisationId,
    workspaceId: workspace.id,
    name: input.name,
    note: input.note ?? null,
    provider: input.provider,
    ...sealKeys(deps, providerKeysOf(input) ?? []),
    customHost: endpoint.customHost,
    sealedModelConfig: sealModelConfig(deps, input.model_config),
    rateLimits: rateLimitsOf(input.rate_limits),
    usageLimits: input.usage_limits == null ? null : usageLimitOf(input.usage_limits),
    status: 'active',
    expiresAt: input.expires_at ?? null,
    createdAt: now,
    lastUpdatedAt: now,
  }
  noteAction(ctx, { resourceId: base.id })
  let record = base
  for (let attempt = 1; ; attempt++) {
    try {
      await commit(request, 200, (writer) => writer.insertVirtualKey(record))
      break
    } catch (error) {
      const slugTaken = isGatewayError(error) && error.code === ERRORS.GW_ADMIN_CONFLICT.code && /slug/i.test(error.message)
      if (!slugTaken || attempt >= SLUG_ATTEMPTS) throw error
      record = { ...record, slug: newSlug(input.name) }
    }
  }
  publishChange(deps, record.id)
  return jsonReply(200, { id: record.id, slug: record.slug, object: 'virtual-key' })
}

async function listVirtualKeys(request: AdminRequest): Promise<Reply | GatewayError> {
  const query = parseQuery(request.ctx, listVirtualKeysQuery)
  if (!query.ok) return query.error
  const { deps, principal } = request
  const { current_page, page_size, workspace_id } = query.value
  let workspaceId: string | undefined
  const slugs = new Map<string, string>()
  if (workspace_id !== undefined || principal.workspaceId !== null) {
    const workspace = await visibleWorkspace(deps, principal, workspace_id ?? principal.workspaceId ?? undefined)
    if (workspace === null) return notFound('Workspace')
    workspaceId = workspace.id
    slugs.set(workspace.id, workspace.slug)
  }
  const page = await deps.store.listVirtualKeys(principal.organisationId, workspaceId === undefined ? {} : { workspaceId }, pageOf(current_page, page_size))
  const now = deps.clock.now()
  const data = []
  for (const key of page.items) {
    let slug = slugs.get(key.workspaceId)
    if (slug === undefined) {
      slug = (await deps.store.findWorkspace(principal.organisationId, key.workspaceId))?.slug ?? key.workspaceId
      slugs.set(key.workspaceId, slug)
    }
    data.push(virtualKeyView(deps, key, slug, now, await keyUsage(deps, key)))
  }
  return jsonReply(200, listView(page.total, data))
}

async function getVirtualKey(request: AdminRequest): Promise<Reply | GatewayError> {
  const found = await visibleKey(request, undefined)
  if (found instanceof GatewayError) return found
  return jsonReply(200, virtualKeyView(request.deps, found.key, found.workspace.slug, request.deps.clock.now(), await keyUsage(request.deps, found.key)))
}

async function updateVirtualKey(request: AdminRequest): Promise<Reply | GatewayError> {
  const body = parseBody(request.ctx, updateVirtualKeyBody)
  if (!body.ok) return body.error
  const found = await changeableKey(request, body.value.workspace_id)
  if (found instanceof GatewayError) return found
  const { deps } = request
  const { key } = found
  const input = body.value
  const rotated = providerKeysOf(input)
  const provider = input.provider ?? key.provider
  const moved = input.custom_host !== undefined && !sameEndpoint(input.custom_host, key.customHost) ? 'custom_host' : provider !== key.provider ? 'provider' : null
  // Checked before the endpoint, so the refusal tells nothing about the new host.
  if (moved !== null && rotated === undefined) {
    return invalid(`${moved}: changing it requires the provider key (key or keys) in the same update, so the stored key is never sent to a new endpoint`, moved)
  }
  let host = key.customHost
  if (input.custom_host !== undefined || provider !== key.provider) {
    const endpoint = await checkEndpoint(deps, provider, input.custom_host === undefined ? key.customHost : input.custom_host)
    if (endpoint instanceof GatewayError) return endpoint
    host = endpoint.customHost
  }
  const updated: VirtualKeyRecord = {
    ...key,
    name: input.name ?? key.name,
    provider,
    note: input.note === undefined ? key.note : input.note,
    ...(rotated === undefined ? {} : sealKeys(deps, rotated)),
    customHost: host,
    sealedModelConfig: input.model_config === undefined ? key.sealedModelConfig : sealModelConfig(deps, input.model_config),
    rateLimits: input.rate_limits === undefined ? key.rateLimits : rateLimitsOf(input.rate_limits),
    usageLimits: input.usage_limits === undefined ? key.usageLimits : input.usage_limits === null ? null : usageLimitOf(input.usage_limits),
    expiresAt: input.expires_at === undefined ? key.expiresAt : input.expires_at,
    // `reset_usage` puts the key back to work (its budget starts a new period below).
    status: input.reset_usage === true ? 'active' : key.status,
    lastUpdatedAt: nowIso(deps, key.lastUpdatedAt),
  }
  await commit(request, 200, (writer) => writer.updateVirtualKey(updated, key.lastUpdatedAt).then(requireApplied))
  publishChange(deps, key.id)
  if (input.reset_usage === true) await deps.budgets.reset({ kind: 'virtual-key', id: key.id })
  return jsonReply(200, virtualKeyView(deps, updated, found.workspace.slug, deps.clock.now(), await keyUsage(deps, updated)))
}

async function deleteVirtualKey(request: AdminRequest): Promise<Reply | GatewayError> {
  const body = parseBody(request.ctx, workspaceIdBody)
  if (!body.ok) return body.error
  const found = await changeableKey(request, body.value.workspace_id)
  if (found instanceof GatewayError) return found
  const { deps, principal } = request
  await commit(request, 200, (writer) => writer.deleteVirtualKey(principal.organisationId, found.key.id))
  publishChange(deps, found.key.id)
  return jsonReply(200, {})
}

export const virtualKeyHandlers: HandlerMap = {
  'virtual-keys.create': createVirtualKey,
  'virtual-keys.list': listVirtualKeys,
  'virtual-keys.get': getVirtualKey,
  'virtual-keys.update': updateVirtualKey,
  'virtual-keys.delete': deleteVirtualKey,
}
