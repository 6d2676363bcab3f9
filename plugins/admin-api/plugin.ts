/**
 * admin-api: the terminal plugin of the admin route group (API.md §5).
 * Phases: onForward (priority 110). Reads `ctx.principal`, `ctx.route.id`, `ctx.params`, `ctx.body`.
 * I/O: the admin store; publishes `api-keys` change notifications when keys are created.
 * Failure policy: validation → 400 AB01 naming the field; unknown or other-workspace resources →
 * 404 AB08 (never revealed); uniqueness → 409 AB07; store errors → 500 AB04 (logged by core).
 */
import { randomBytes, randomUUID } from 'node:crypto'
import type { ApiKeyType, Principal, RequestContext } from '../../core/context.js'
import { ERRORS, gatewayError, type GatewayError } from '../../core/errors.js'
import { jsonReply, type GatewayPlugin, type Reply } from '../../core/plugin.js'
import { CHANGE_CHANNELS, type AdminStore, type ChangeNotifier, type Clock, type WorkspaceRecord } from '../../core/ports.js'
import { ADMIN_KEY_SCOPES, WORKSPACE_KEY_SCOPES, normaliseScope } from '../../core/scopes.js'
import { hashSecret, maskSecret, newApiKeySecret } from '../../core/secrets.js'
import { createApiKeyBody, createWorkspaceBody, describeIssue } from './schemas.js'
import { organisationView, workspaceView } from './views.js'

type Handler = (ctx: RequestContext, principal: Principal) => Promise<Reply | GatewayError>

const ADMIN_SCOPE_SET = new Set(ADMIN_KEY_SCOPES)
const WORKSPACE_SCOPE_SET = new Set(WORKSPACE_KEY_SCOPES)

function notFound(what: string): GatewayError {
  return gatewayError(ERRORS.GW_ADMIN_NOT_FOUND, `${what} not found`)
}

function invalid(message: string): GatewayError {
  return gatewayError(ERRORS.GW_ADMIN_VALIDATION, message)
}

/** `My Team!` → `my-team` (at most 20 characters). */
function slugPart(name: string): string {
  const slug = name.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 20).replace(/-+$/, '')
  return slug.length > 0 ? slug : 'workspace'
}

export class AdminApiPlugin implements GatewayPlugin {
  readonly #store: AdminStore
  readonly #notifier: ChangeNotifier
  readonly #clock: Clock
  readonly #handlers: ReadonlyMap<string, Handler>

  constructor(store: AdminStore, notifier: ChangeNotifier, clock: Clock) {
    this.#store = store
    this.#notifier = notifier
    this.#clock = clock
    this.#handlers = new Map<string, Handler>([
      ['admin.organisation.get', (_ctx, principal) => this.#getOrganisation(principal)],
      ['admin.workspaces.create', (ctx, principal) => this.#createWorkspace(ctx, principal)],
      ['admin.workspaces.get', (ctx, principal) => this.#getWorkspace(ctx, principal)],
      ['api-keys.organisation-service.create', (ctx, principal) => this.#createApiKey(ctx, principal, 'organisation-service')],
      ['api-keys.workspace-service.create', (ctx, principal) => this.#createApiKey(ctx, principal, 'workspace-service')],
      ['api-keys.workspace-user.create', (ctx, principal) => this.#createApiKey(ctx, principal, 'workspace-user')],
    ])
  }

  async onForward(ctx: RequestContext): Promise<Reply | GatewayError> {
    const handler = this.#handlers.get(ctx.route.id)
    const principal = ctx.principal
    if (handler === undefined || principal === null) return gatewayError(ERRORS.GW_REQ_ROUTE_NOT_FOUND)
    return handler(ctx, principal)
  }

  #now(): string {
    return new Date(this.#clock.now()).toISOString()
  }

  async #getOrganisation(principal: Principal): Promise<Reply | GatewayError> {
    const organisation = await this.#store.findFirstOrganisation()
    if (organisation === null || organisation.id !== principal.organisationId) return notFound('Organisation')
    return jsonReply(200, organisationView(organisation))
  }

  async #createWorkspace(ctx: RequestContext, principal: Principal): Promise<Reply | GatewayError> {
    const parsed = createWorkspaceBody.safeParse(ctx.body)
    if (!parsed.success) return invalid(describeIssue(parsed.error))
    const now = this.#now()
    const workspace: WorkspaceRecord = {
      id: randomUUID(),
      slug: `ws-${slugPart(parsed.data.name)}-${randomBytes(3).toString('hex')}`,
      organisationId: principal.organisationId,
      name: parsed.data.name,
      description: parsed.data.description ?? null,
      createdAt: now,
      lastUpdatedAt: now,
    }
    await this.#store.insertWorkspace(workspace)
    return jsonReply(200, workspaceView(workspace))
  }

  async #getWorkspace(ctx: RequestContext, principal: Principal): Promise<Reply | GatewayError> {
    const workspace = await this.#visibleWorkspace(principal, ctx.params.workspaceId ?? '')
    if (workspace === null) return notFound('Workspace')
    return jsonReply(200, { ...workspaceView(workspace), users: [] })
  }

  /**
   * A workspace the caller may see: any of its organisation for Admin API keys, only its own for
   * workspace keys (another workspace is reported as not found, never revealed).
   */
  async #visibleWorkspace(principal: Principal, idOrSlug: string): Promise<WorkspaceRecord | null> {
    if (idOrSlug.length === 0) return null
    const workspace = await this.#store.findWorkspace(principal.organisationId, idOrSlug)
    if (workspace === null) return null
    if (principal.workspaceId !== null && principal.workspaceId !== workspace.id) return null
    return workspace
  }

  async #createApiKey(ctx: RequestContext, principal: Principal, type: ApiKeyType): Promise<Reply | GatewayError> {
    const parsed = createApiKeyBody.safeParse(ctx.body)
    if (!parsed.success) return invalid(describeIssue(parsed.error))
    const body = parsed.data
    if (body.organisation_id !== undefined && body.organisation_id !== principal.organisationId) return notFound('Organisation')
    if (principal.keyType === 'workspace-user') return gatewayError(ERRORS.GW_SCOPE_MISSING, 'Workspace user keys cannot create API keys')

    const allowed = type === 'organisation-service' ? ADMIN_SCOPE_SET : WORKSPACE_SCOPE_SET
    const scopes = body.scopes.map(normaliseScope)
    const unknown = scopes.find((scope) => !allowed.has(scope))
    if (unknown !== undefined) return invalid(`scopes: "${unknown}" is not a valid scope for a ${type} key`)

    let workspace: WorkspaceRecord | null = null
    if (type === 'organisation-service') {
      if (body.workspace_id !== undefined) return invalid('workspace_id: not allowed for organisation keys')
      if (body.user_id !== undefined) return invalid('user_id: not allowed for service keys')
    } else {
      const requested = body.workspace_id ?? (principal.workspaceId !== null ? principal.workspaceId : undefined)
      if (requested === undefined) return invalid('workspace_id: required for workspace keys')
      workspace = await this.#visibleWorkspace(principal, requested)
      if (workspace === null) return notFound('Workspace')
      if (type === 'workspace-user') {
        if (body.user_id === undefined) return invalid('user_id: required for user keys')
        if ((await this.#store.findUser(principal.organisationId, body.user_id)) === null) return notFound('User')
      } else if (body.user_id !== undefined) {
        return invalid('user_id: not allowed for service keys')
      }
    }

    const secret = newApiKeySecret()
    const keyHash = hashSecret(secret)
    const now = this.#now()
    const id = randomUUID()
    await this.#store.insertApiKey({
      id,
      keyHash,
      maskedKey: maskSecret(secret),
      name: body.name,
      description: body.description ?? null,
      type,
      organisationId: principal.organisationId,
      workspaceId: workspace?.id ?? null,
      userId: body.user_id ?? null,
      scopes: [...new Set(scopes)],
      status: 'active',
      expiresAt: body.expires_at ?? null,
      creationMode: 'api',
      createdAt: now,
      lastUpdatedAt: now,
    })
    // Other instances may have cached this hash as unknown.
    this.#notifier.publish(CHANGE_CHANNELS.apiKeys, keyHash)
    return jsonReply(200, { id, key: secret, object: 'api-key' })
  }
}
