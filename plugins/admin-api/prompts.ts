/**
 * Prompt templates (`/v1/prompts…`, API.md §3 and §5, reference/admin-api.md §13.2): a template
 * (`string`) with saved model parameters, kept in numbered versions, one of them published (what
 * `POST /v1/prompts/{id}/completions` runs without a suffix). The data plane (prompt-render
 * plugin) renders and runs them; this file only stores them.
 *
 * - Create: `name`, `string`, `parameters`, and optionally `collection_id` (else the workspace's
 *   default collection, made on first use), `virtual_key` (a virtual key of the same workspace, by
 *   slug or UUID; stored as its slug), `model`, `functions`, `tools`, `tool_choice`,
 *   `version_description`, `template_metadata`, `is_raw_template`. Version 1 is made and published.
 *   The template is checked (prompt-templates.ts): kind, Mustache syntax, size.
 * - Update: content fields (`VERSION_FIELDS`) make a new version (latest + 1, not published). With
 *   `patch: true` the omitted ones are copied from the latest version; without it every field of
 *   `REQUIRED_WITHOUT_PATCH` must be sent (null where nullable), so an update never drops a saved
 *   setting silently. `name` and `collection_id` alone make no version.
 * - `PUT …/makeDefault {version}` publishes a version (`prompts.publish`); `PUT …/versions/{id}`
 *   changes only its `label_id` (a built-in label or one of the prompt's workspace; a label marks
 *   at most one version of a prompt).
 * - Workspaces as for virtual keys: an Admin API key names `workspace_id` on create (and may on
 *   the other routes, where it must be the prompt's workspace, else 404); a workspace key or JWT is
 *   locked to its workspace; another workspace's prompt, collection, virtual key or label is 404,
 *   never revealed; creating, changing, publishing and deleting need a workspace admin or manager.
 * Every change is stored with its audit entry in one transaction and then published on the
 * `prompts` channel (the workspace UUID), so every instance drops its compiled templates.
 */
import { randomUUID } from 'node:crypto'
import { z } from 'zod'
import type { CollectionRecord, PromptRecord, PromptVersionRecord, WorkspaceRecord } from '../../core/admin-records.js'
import type { Principal } from '../../core/context.js'
import { GatewayError } from '../../core/errors.js'
import { jsonReply, type Reply } from '../../core/plugin.js'
import { canManage, listScope, pathResourceWorkspace, targetWorkspace } from './access.js'
import { collectionInWorkspace, collectionRef, CREATE_ATTEMPTS, newDefaultCollection, retryableConflict } from './collections.js'
import { usableLabel } from './labels.js'
import { checkPromptTemplate, MAX_TEMPLATE_BYTES, newSlug, publishPromptChange } from './prompt-templates.js'
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
import { snakePaging, workspaceIdBody, workspaceIdField, workspaceIdQuery } from './schemas.js'
import { listView } from './views.js'

// ---------------------------------------------------------------------------------------------
// Schemas (also used by the OpenAPI document)

/** Saved settings (parameters, tools, ...) stay small: they travel with every rendered request. */
export const MAX_SETTINGS_CHARS = 256 * 1024

function bounded<T extends z.ZodType>(schema: T): T {
  return schema.refine((value) => JSON.stringify(value).length <= MAX_SETTINGS_CHARS, `must be at most ${MAX_SETTINGS_CHARS} characters of JSON`) as unknown as T
}

const jsonObject = z.record(z.string().max(128), z.unknown())

/** Keys the rendered template itself provides: saving them as parameters would replace the messages or prompt. */
const TEMPLATE_KEYS = ['messages', 'prompt'] as const

const promptName = z.string().trim().min(1).max(200)

export const templateText = z
  .string()
  .min(1)
  .max(MAX_TEMPLATE_BYTES)
  .describe(
    'The template: a JSON array of chat messages (role, content) or plain text (a completion template), with Mustache variables, sections and partials; at most 1 MiB',
  )

const parameters = bounded(jsonObject)
  .refine((value) => TEMPLATE_KEYS.every((key) => !(key in value)), 'must not contain messages or prompt (the template provides them)')
  .describe('Saved hyperparameters sent with every rendered request (temperature, max_tokens, ...); the request body overrides them')

const versionFields = {
  string: templateText,
  parameters,
  virtual_key: z.string().min(1).max(200).nullable().describe('Slug or UUID of a virtual key of the same workspace: the provider the prompt runs on'),
  model: z.string().trim().min(1).max(200).nullable(),
  functions: bounded(z.array(jsonObject).max(128)).nullable(),
  tools: bounded(z.array(jsonObject).max(128)).nullable(),
  tool_choice: bounded(z.union([z.string().max(100), jsonObject])).nullable(),
  template_metadata: bounded(jsonObject).nullable(),
  version_description: z.string().max(2000).nullable(),
  is_raw_template: z
    .union([z.literal(0), z.literal(1), z.boolean()])
    .describe('1: the template is plain text even if it reads as JSON; 0: it must be a chat template; omitted: a JSON array is a chat template, anything else plain text'),
}

export const createPromptBody = z
  .object({
    workspace_id: workspaceIdField.optional(),
    name: promptName,
    collection_id: collectionRef.optional().describe("UUID or slug of a collection of the workspace; omitted: the workspace's default collection"),
    string: versionFields.string,
    parameters: versionFields.parameters,
    virtual_key: versionFields.virtual_key.optional(),
    model: versionFields.model.optional(),
    functions: versionFields.functions.optional(),
    tools: versionFields.tools.optional(),
    tool_choice: versionFields.tool_choice.optional(),
    template_metadata: versionFields.template_metadata.optional(),
    version_description: versionFields.version_description.optional(),
    is_raw_template: versionFields.is_raw_template.optional(),
  })
  .strict()

export const updatePromptBody = z
  .object({
    workspace_id: workspaceIdField.optional(),
    patch: z.boolean().optional().describe('Copy the version fields left out from the latest version (else every version field must be sent)'),
    name: promptName.optional(),
    collection_id: collectionRef.optional(),
    string: versionFields.string.optional(),
    parameters: versionFields.parameters.optional(),
    virtual_key: versionFields.virtual_key.optional(),
    model: versionFields.model.optional(),
    functions: versionFields.functions.optional(),
    tools: versionFields.tools.optional(),
    tool_choice: versionFields.tool_choice.optional(),
    template_metadata: versionFields.template_metadata.optional(),
    version_description: versionFields.version_description.optional(),
    is_raw_template: versionFields.is_raw_template.optional(),
  })
  .strict()

export const listPromptsQuery = z.object({
  ...snakePaging,
  workspace_id: workspaceIdField.optional(),
  collection_id: collectionRef.optional(),
  search: z.string().max(200).optional().describe('Case-insensitive part of the name or slug'),
})

export const updatePromptVersionBody = z
  .object({
    workspace_id: workspaceIdField.optional(),
    label_id: z.string().min(1).max(200).nullable().describe('A label (UUID, or name) of the prompt’s workspace or a built-in one; null takes the label off'),
  })
  .strict()

export const publishBody = z
  .object({
    workspace_id: workspaceIdField.optional(),
    version: z.number().int().min(1).describe('The version number to publish'),
  })
  .strict()

export const promptWorkspaceQuery = workspaceIdQuery
export const deletePromptBody = workspaceIdBody

/** The fields of a version: sending any of them makes a new version. */
const VERSION_FIELDS = ['string', 'parameters', 'virtual_key', 'model', 'functions', 'tools', 'tool_choice', 'template_metadata', 'version_description', 'is_raw_template'] as const
/** What an update that makes a version must send without `patch: true` (a version's description and kind are its own). */
const REQUIRED_WITHOUT_PATCH = ['string', 'parameters', 'virtual_key', 'model', 'functions', 'tools', 'tool_choice', 'template_metadata'] as const

type CreateInput = z.output<typeof createPromptBody>
type UpdateInput = z.output<typeof updatePromptBody>

// ---------------------------------------------------------------------------------------------
// Views

export function promptView(prompt: PromptRecord, version: PromptVersionRecord, workspaceSlug: string): Record<string, unknown> {
  return {
    object: 'prompt',
    id: prompt.id,
    slug: prompt.slug,
    name: prompt.name,
    collection_id: prompt.collectionId,
    workspace_id: workspaceSlug,
    string: version.template,
    parameters: version.parameters,
    prompt_version: version.version,
    prompt_version_id: version.id,
    prompt_version_status: version.status,
    prompt_version_description: version.description,
    prompt_version_label_id: version.labelId,
    virtual_key: version.virtualKey,
    model: version.model,
    functions: version.functions,
    tools: version.tools,
    tool_choice: version.toolChoice ?? null,
    template_metadata: version.templateMetadata,
    is_raw_template: version.isRawTemplate ? 1 : 0,
    published_version: prompt.publishedVersion,
    latest_version: prompt.latestVersion,
    status: prompt.status,
    created_at: prompt.createdAt,
    last_updated_at: prompt.lastUpdatedAt,
  }
}

function promptListItem(prompt: PromptRecord, model: string | null, workspaceSlug: string): Record<string, unknown> {
  return {
    object: 'prompt',
    id: prompt.id,
    slug: prompt.slug,
    name: prompt.name,
    collection_id: prompt.collectionId,
    workspace_id: workspaceSlug,
    model,
    published_version: prompt.publishedVersion,
    latest_version: prompt.latestVersion,
    status: prompt.status,
    created_at: prompt.createdAt,
    last_updated_at: prompt.lastUpdatedAt,
  }
}

function versionListItem(version: PromptVersionRecord): Record<string, unknown> {
  return {
    object: 'prompt',
    id: version.id,
    prompt_id: version.promptId,
    prompt_template: version.template,
    prompt_version: version.version,
    prompt_description: version.description,
    label_id: version.labelId,
    is_raw_template: version.isRawTemplate ? 1 : 0,
    created_at: version.createdAt,
    status: version.status,
  }
}

// ---------------------------------------------------------------------------------------------
// Helpers

/** `is_raw_template` as sent (0/1 or a boolean) → `true`, `false` or `undefined`. */
function rawFlag(value: 0 | 1 | boolean | undefined): boolean | undefined {
  return value === undefined ? undefined : value === 1 || value === true
}

/** The slug of the virtual key `idOrSlug` names if it belongs to `workspaceId`, else `null` (reported as not found). */
async function workspaceVirtualKey(deps: AdminDeps, principal: Principal, idOrSlug: string, workspaceId: string): Promise<string | null> {
  const key = await deps.store.findVirtualKey(principal.organisationId, idOrSlug)
  return key !== null && key.workspaceId === workspaceId ? key.slug : null
}

/** The version fields of a create or update, resolved and checked; omitted ones from `base` (patch), else empty. */
async function versionContent(
  request: AdminRequest,
  input: CreateInput | UpdateInput,
  base: PromptVersionRecord | null,
  workspaceId: string,
): Promise<GatewayError | Omit<PromptVersionRecord, 'id' | 'promptId' | 'organisationId' | 'workspaceId' | 'version' | 'labelId' | 'status' | 'createdAt'>> {
  const { deps, principal } = request
  const template = input.string ?? base?.template
  if (template === undefined) return invalid('string: required', 'string')
  let isRawTemplate = base?.isRawTemplate ?? false
  if (input.string !== undefined || input.is_raw_template !== undefined || base === null) {
    const check = checkPromptTemplate(template, rawFlag(input.is_raw_template))
    if (!check.ok) return invalid(check.message, 'string')
    isRawTemplate = check.isRawTemplate
  }
  let virtualKey = base?.virtualKey ?? null
  if (input.virtual_key !== undefined) {
    virtualKey = input.virtual_key === null ? null : await workspaceVirtualKey(deps, principal, input.virtual_key, workspaceId)
    if (input.virtual_key !== null && virtualKey === null) return notFound('Virtual key')
  }
  return {
    template,
    parameters: input.parameters ?? base?.parameters ?? {},
    model: input.model === undefined ? (base?.model ?? null) : input.model,
    virtualKey,
    functions: input.functions === undefined ? (base?.functions ?? null) : input.functions,
    tools: input.tools === undefined ? (base?.tools ?? null) : input.tools,
    toolChoice: input.tool_choice === undefined ? (base?.toolChoice ?? null) : input.tool_choice,
    templateMetadata: input.template_metadata === undefined ? (base?.templateMetadata ?? null) : input.template_metadata,
    // A version's description is its own: never copied.
    description: input.version_description ?? null,
    isRawTemplate,
  }
}

interface Found {
  readonly prompt: PromptRecord
  readonly workspace: WorkspaceRecord
}

/** The prompt of the path (UUID or slug) if the caller may see it, and with `change` also change it (see `pathResourceWorkspace`). */
async function visiblePrompt(request: AdminRequest, namedInBody: string | undefined, change = false): Promise<Found | GatewayError> {
  const prompt = await request.deps.store.findPrompt(request.principal.organisationId, request.ctx.params.promptId ?? '')
  const workspace = await pathResourceWorkspace(request, prompt, namedInBody, 'Prompt', change ? 'prompts' : null)
  return workspace instanceof GatewayError ? workspace : { prompt: prompt!, workspace }
}

/** The prompt of the path if the caller may also change it (403 for read-only members). */
function changeablePrompt(request: AdminRequest, namedInBody: string | undefined): Promise<Found | GatewayError> {
  return visiblePrompt(request, namedInBody, true)
}

/** A version of the prompt by UUID or by number. */
function findVersion(deps: AdminDeps, promptId: string, idOrNumber: string): Promise<PromptVersionRecord | null> {
  return /^[1-9]\d{0,8}$/.test(idOrNumber)
    ? deps.store.findPromptVersion(promptId, { kind: 'number', version: Number(idOrNumber) })
    : deps.store.findPromptVersionById(promptId, idOrNumber)
}

// ---------------------------------------------------------------------------------------------
// Handlers

async function createPrompt(request: AdminRequest): Promise<Reply | GatewayError> {
  const body = parseBody(request.ctx, createPromptBody)
  if (!body.ok) return body.error
  const { deps, principal, ctx } = request
  const input = body.value
  const target = await targetWorkspace(deps, principal, input.workspace_id)
  if (!target.ok) return target.missing ? invalid('workspace_id: required with an Admin API key', 'workspace_id') : notFound('Workspace')
  const workspace = target.workspace
  noteAction(ctx, { workspaceId: workspace.id })
  if (!(await canManage(deps, principal, workspace))) return forbidden('Only workspace admins and managers can create prompts')
  let named: CollectionRecord | null = null
  if (input.collection_id !== undefined) {
    named = await collectionInWorkspace(deps, principal, input.collection_id, workspace.id)
    if (named === null) return notFound('Collection')
  }
  const content = await versionContent(request, input, null, workspace.id)
  if (content instanceof GatewayError) return content

  const now = nowIso(deps)
  const promptId = randomUUID()
  const versionId = randomUUID()
  noteAction(ctx, { resourceId: promptId })
  let slug = ''
  for (let attempt = 1; ; attempt++) {
    // Read again on a retry: a concurrent first prompt may have made the default collection.
    const existing = named ?? (await deps.store.findDefaultCollection(workspace.id))
    const made = existing === null ? newDefaultCollection(principal.organisationId, workspace.id, now) : null
    slug = newSlug(input.name, 'prompt', 'pp-')
    const prompt: PromptRecord = {
      id: promptId,
      slug,
      organisationId: principal.organisationId,
      workspaceId: workspace.id,
      collectionId: (existing ?? made)?.id ?? '',
      name: input.name,
      status: 'active',
      publishedVersion: 1,
      latestVersion: 1,
      createdAt: now,
      lastUpdatedAt: now,
    }
    const first: PromptVersionRecord = {
      ...content,
      id: versionId,
      promptId,
      organisationId: principal.organisationId,
      workspaceId: workspace.id,
      version: 1,
      labelId: null,
      status: 'active',
      createdAt: now,
    }
    try {
      await commit(request, 200, async (writer) => {
        if (made !== null) await writer.insertCollection(made)
        await writer.insertPrompt(prompt, first)
      })
      break
    } catch (error) {
      if (!retryableConflict(error) || attempt >= CREATE_ATTEMPTS) throw error
    }
  }
  publishPromptChange(deps, workspace.id)
  return jsonReply(200, { id: promptId, slug, version_id: versionId, object: 'prompt' })
}

async function listPrompts(request: AdminRequest): Promise<Reply | GatewayError> {
  const query = parseQuery(request.ctx, listPromptsQuery)
  if (!query.ok) return query.error
  const { deps, principal } = request
  const { current_page, page_size, workspace_id, collection_id, search } = query.value
  const scope = await listScope(request, workspace_id)
  if (scope instanceof GatewayError) return scope
  const { workspaceId, slugs } = scope
  let collectionId: string | undefined
  if (collection_id !== undefined) {
    const collection = await deps.store.findCollection(principal.organisationId, collection_id)
    if (collection === null || (workspaceId !== undefined && collection.workspaceId !== workspaceId)) return notFound('Collection')
    collectionId = collection.id
  }
  const filter = {
    ...(workspaceId === undefined ? {} : { workspaceId }),
    ...(collectionId === undefined ? {} : { collectionId }),
    ...(search === undefined ? {} : { search }),
  }
  const page = await deps.store.listPrompts(principal.organisationId, filter, pageOf(current_page, page_size))
  const data = []
  for (const prompt of page.items) {
    let slug = slugs.get(prompt.workspaceId)
    if (slug === undefined) {
      slug = (await deps.store.findWorkspace(principal.organisationId, prompt.workspaceId))?.slug ?? prompt.workspaceId
      slugs.set(prompt.workspaceId, slug)
    }
    const published = await deps.store.findPromptVersion(prompt.id, { kind: 'published' })
    data.push(promptListItem(prompt, published?.model ?? null, slug))
  }
  return jsonReply(200, listView(page.total, data))
}

/** The prompt with its published version (the one a call without a suffix runs). */
async function getPrompt(request: AdminRequest): Promise<Reply | GatewayError> {
  const found = await visiblePrompt(request, undefined)
  if (found instanceof GatewayError) return found
  const version = await request.deps.store.findPromptVersion(found.prompt.id, { kind: 'published' })
  if (version === null) return notFound('Prompt version')
  return jsonReply(200, promptView(found.prompt, version, found.workspace.slug))
}

async function updatePrompt(request: AdminRequest): Promise<Reply | GatewayError> {
  const body = parseBody(request.ctx, updatePromptBody)
  if (!body.ok) return body.error
  const input = body.value
  const found = await changeablePrompt(request, input.workspace_id)
  if (found instanceof GatewayError) return found
  const { deps, principal } = request
  const { prompt, workspace } = found
  const latest = await deps.store.findPromptVersion(prompt.id, { kind: 'latest' })
  if (latest === null) return notFound('Prompt version')

  let version: PromptVersionRecord | null = null
  if (VERSION_FIELDS.some((field) => input[field] !== undefined)) {
    if (input.patch !== true) {
      const missing = REQUIRED_WITHOUT_PATCH.find((field) => input[field] === undefined)
      if (missing !== undefined) {
        return invalid(`${missing}: required when an update makes a new version without patch: true (send every version field, or patch: true to copy the omitted ones from the latest version)`, missing)
      }
    }
    const content = await versionContent(request, input, input.patch === true ? latest : null, workspace.id)
    if (content instanceof GatewayError) return content
    version = {
      ...content,
      id: randomUUID(),
      promptId: prompt.id,
      organisationId: prompt.organisationId,
      workspaceId: prompt.workspaceId,
      version: prompt.latestVersion + 1,
      labelId: null,
      status: 'active',
      createdAt: nowIso(deps),
    }
  }
  let collectionId = prompt.collectionId
  if (input.collection_id !== undefined) {
    const collection = await collectionInWorkspace(deps, principal, input.collection_id, workspace.id)
    if (collection === null) return notFound('Collection')
    collectionId = collection.id
  }
  const updated: PromptRecord = {
    ...prompt,
    name: input.name ?? prompt.name,
    collectionId,
    latestVersion: version?.version ?? prompt.latestVersion,
    lastUpdatedAt: nowIso(deps, prompt.lastUpdatedAt),
  }
  await commit(request, 200, async (writer) => {
    // The optimistic check first: of two concurrent updates only one makes version n + 1.
    requireApplied(await writer.updatePrompt(updated, prompt.lastUpdatedAt))
    if (version !== null) await writer.insertPromptVersion(version)
  })
  publishPromptChange(deps, workspace.id)
  const current = version ?? latest
  return jsonReply(200, { id: prompt.id, slug: prompt.slug, prompt_version_id: current.id, prompt_version: current.version })
}

async function deletePrompt(request: AdminRequest): Promise<Reply | GatewayError> {
  const body = parseBody(request.ctx, deletePromptBody)
  if (!body.ok) return body.error
  const found = await changeablePrompt(request, body.value.workspace_id)
  if (found instanceof GatewayError) return found
  const { deps, principal } = request
  await commit(request, 200, (writer) => writer.deletePrompt(principal.organisationId, found.prompt.id).then(requireApplied))
  publishPromptChange(deps, found.workspace.id)
  return jsonReply(200, {})
}

/** Every version, newest first, as a bare array (as the reference answers). */
async function listPromptVersions(request: AdminRequest): Promise<Reply | GatewayError> {
  const found = await visiblePrompt(request, undefined)
  if (found instanceof GatewayError) return found
  const versions = await request.deps.store.listPromptVersions(found.prompt.id)
  return jsonReply(200, versions.map(versionListItem))
}

/** One version (by UUID or number) as a prompt object. */
async function getPromptVersion(request: AdminRequest): Promise<Reply | GatewayError> {
  const found = await visiblePrompt(request, undefined)
  if (found instanceof GatewayError) return found
  const version = await findVersion(request.deps, found.prompt.id, request.ctx.params.versionId ?? '')
  if (version === null) return notFound('Prompt version')
  return jsonReply(200, promptView(found.prompt, version, found.workspace.slug))
}

/** Sets or removes a version's label (versions are otherwise immutable). */
async function updatePromptVersion(request: AdminRequest): Promise<Reply | GatewayError> {
  const body = parseBody(request.ctx, updatePromptVersionBody)
  if (!body.ok) return body.error
  const found = await changeablePrompt(request, body.value.workspace_id)
  if (found instanceof GatewayError) return found
  const { deps, principal, ctx } = request
  const { prompt, workspace } = found
  const version = await findVersion(deps, prompt.id, ctx.params.versionId ?? '')
  if (version === null) return notFound('Prompt version')
  noteAction(ctx, { resourceId: version.id })
  let labelId: string | null = null
  if (body.value.label_id !== null) {
    const label = await usableLabel(deps, principal, body.value.label_id, workspace.id)
    if (label === null) return notFound('Label')
    labelId = label.id
  }
  await commit(request, 200, (writer) => writer.setPromptVersionLabel(prompt.id, version.id, labelId).then(requireApplied))
  publishPromptChange(deps, workspace.id)
  return jsonReply(200, {})
}

/** Publishes a version: calls without a suffix run it from now on, on every instance. */
async function publishPrompt(request: AdminRequest): Promise<Reply | GatewayError> {
  const body = parseBody(request.ctx, publishBody)
  if (!body.ok) return body.error
  const found = await changeablePrompt(request, body.value.workspace_id)
  if (found instanceof GatewayError) return found
  const { deps } = request
  const { prompt, workspace } = found
  const version = await deps.store.findPromptVersion(prompt.id, { kind: 'number', version: body.value.version })
  if (version === null) return notFound('Prompt version')
  const updated: PromptRecord = { ...prompt, publishedVersion: version.version, lastUpdatedAt: nowIso(deps, prompt.lastUpdatedAt) }
  await commit(request, 200, (writer) => writer.updatePrompt(updated, prompt.lastUpdatedAt).then(requireApplied))
  publishPromptChange(deps, workspace.id)
  return jsonReply(200, {})
}

export const promptHandlers: HandlerMap = {
  'prompts.create': createPrompt,
  'prompts.list': listPrompts,
  'prompts.get': getPrompt,
  'prompts.update': updatePrompt,
  'prompts.delete': deletePrompt,
  'prompts.versions.list': listPromptVersions,
  'prompts.versions.get': getPromptVersion,
  'prompts.versions.update': updatePromptVersion,
  'prompts.publish': publishPrompt,
}
