/**
 * auth: who is calling.
 * Phases: onRequest (priority 1000), start (bootstrap). Writes `ctx.principal`.
 * Reads the key from `x-gateway-api-key`, else `Authorization: Bearer`; looks it up by SHA-256 in
 * the admin store through an in-process cache (evicted by `api-keys` change notifications).
 * Failure policy: fails closed. A store error with nothing cached is 503; a stale cached entry is
 * used while the store is unreachable.
 * Start: on an empty store, creates the organisation, its owner, a default workspace and an Admin
 * API key (from `bootstrap.adminKey`, or generated and printed once).
 */
import { randomBytes, randomUUID } from 'node:crypto'
import type { Principal, RequestContext } from '../../core/context.js'
import { ERRORS, gatewayError, type GatewayError } from '../../core/errors.js'
import type { GatewayPlugin } from '../../core/plugin.js'
import {
  CHANGE_CHANNELS,
  type AdminStore,
  type ApiKeyRecord,
  type ChangeNotifier,
  type Clock,
  type Logger,
} from '../../core/ports.js'
import { ADMIN_KEY_SCOPES, normaliseScope } from '../../core/scopes.js'
import { hashSecret, maskSecret, newApiKeySecret } from '../../core/secrets.js'
import type { AuthConfig } from './config.js'

interface CacheEntry {
  /** `null` remembers an unknown key. */
  readonly record: ApiKeyRecord | null
  readonly principal: Principal | null
  /** `record.expiresAt` parsed once (epoch ms; `Infinity` when the key never expires). */
  readonly expiresAtMs: number
  readonly freshUntil: number
}

const MISSING_KEY = gatewayError(ERRORS.GW_AUTH_KEY_MISSING)
const INVALID_KEY = gatewayError(ERRORS.GW_AUTH_KEY_INVALID)

export class AuthPlugin implements GatewayPlugin {
  readonly #config: AuthConfig
  readonly #store: AdminStore
  readonly #notifier: ChangeNotifier
  readonly #clock: Clock
  readonly #logger: Logger
  readonly #cache = new Map<string, CacheEntry>()
  #unsubscribe: (() => void) | null = null

  constructor(config: AuthConfig, store: AdminStore, notifier: ChangeNotifier, clock: Clock, logger: Logger) {
    this.#config = config
    this.#store = store
    this.#notifier = notifier
    this.#clock = clock
    this.#logger = logger
  }

  async start(): Promise<void> {
    this.#unsubscribe = this.#notifier.subscribe(CHANGE_CHANNELS.apiKeys, (message) => {
      if (message === '*') this.#cache.clear()
      else this.#cache.delete(message)
    })
    await this.#bootstrap()
  }

  async close(): Promise<void> {
    this.#unsubscribe?.()
    this.#cache.clear()
  }

  onRequest(ctx: RequestContext): GatewayError | undefined | Promise<GatewayError | undefined> {
    const headers = ctx.headers
    let secret = headers['x-gateway-api-key']
    let credentialHeader: Principal['credentialHeader'] = 'x-gateway-api-key'
    if (secret === undefined) {
      const authorization = headers.authorization
      if (authorization !== undefined && authorization.startsWith('Bearer ')) {
        secret = authorization.slice(7).trim()
        credentialHeader = 'authorization'
      }
    }
    if (secret === undefined || secret.length === 0) return MISSING_KEY
    const hash = hashSecret(secret)
    const cached = this.#cache.get(hash)
    const now = this.#clock.now()
    if (cached !== undefined && cached.freshUntil > now) return this.#admit(ctx, cached, credentialHeader, now)
    return this.#lookup(ctx, hash, cached, credentialHeader)
  }

  async #lookup(
    ctx: RequestContext,
    hash: string,
    stale: CacheEntry | undefined,
    credentialHeader: Principal['credentialHeader'],
  ): Promise<GatewayError | undefined> {
    let record: ApiKeyRecord | null
    try {
      record = await this.#store.findApiKeyByHash(hash)
    } catch (error) {
      if (stale !== undefined) {
        this.#logger.warn({ err: error }, 'admin store unreachable: using a stale cached API key')
        return this.#admit(ctx, stale, credentialHeader, this.#clock.now())
      }
      this.#logger.error({ err: error }, 'admin store unreachable: refusing the request')
      return gatewayError(ERRORS.GW_AUTH_UNAVAILABLE)
    }
    const now = this.#clock.now()
    const entry: CacheEntry = {
      record,
      principal: record === null ? null : principalOf(record, credentialHeader),
      expiresAtMs: record?.expiresAt == null ? Number.POSITIVE_INFINITY : Date.parse(record.expiresAt),
      freshUntil: now + (record === null ? this.#config.negativeCacheTtlMs : this.#config.cacheTtlMs),
    }
    this.#remember(hash, entry)
    return this.#admit(ctx, entry, credentialHeader, now)
  }

  #admit(ctx: RequestContext, entry: CacheEntry, credentialHeader: Principal['credentialHeader'], now: number): GatewayError | undefined {
    const { record, principal } = entry
    if (record === null || principal === null) return INVALID_KEY
    if (entry.expiresAtMs <= now || record.status === 'expired') return gatewayError(ERRORS.GW_AUTH_KEY_EXPIRED)
    ctx.principal = principal.credentialHeader === credentialHeader ? principal : { ...principal, credentialHeader }
    return undefined
  }

  #remember(hash: string, entry: CacheEntry): void {
    if (this.#cache.size >= this.#config.maxCacheEntries) {
      // Maps iterate in insertion order: drop the oldest entry.
      const oldest = this.#cache.keys().next()
      if (!oldest.done) this.#cache.delete(oldest.value)
    }
    this.#cache.set(hash, entry)
  }

  async #bootstrap(): Promise<void> {
    if ((await this.#store.findFirstOrganisation()) !== null) return
    const settings = this.#config.bootstrap
    const generated = settings.adminKey.length === 0
    const secret = generated ? newApiKeySecret() : settings.adminKey
    const now = new Date(this.#clock.now()).toISOString()
    const organisationId = randomUUID()
    const ownerId = randomUUID()
    await this.#store.bootstrap({
      organisation: { id: organisationId, name: settings.organisationName, createdAt: now },
      owner: {
        id: ownerId,
        organisationId,
        email: settings.ownerEmail,
        firstName: 'Owner',
        lastName: '',
        role: 'owner',
        createdAt: now,
      },
      workspace: {
        id: randomUUID(),
        slug: `ws-default-${randomBytes(3).toString('hex')}`,
        organisationId,
        name: settings.workspaceName,
        description: 'Created on first start',
        createdAt: now,
        lastUpdatedAt: now,
      },
      adminKey: {
        id: randomUUID(),
        keyHash: hashSecret(secret),
        maskedKey: maskSecret(secret),
        name: 'Bootstrap Admin API key',
        description: 'Created on first start',
        type: 'organisation-service',
        organisationId,
        workspaceId: null,
        userId: ownerId,
        scopes: ADMIN_KEY_SCOPES,
        status: 'active',
        expiresAt: null,
        creationMode: 'auto',
        createdAt: now,
        lastUpdatedAt: now,
      },
    })
    this.#logger.info({ organisationId }, generated ? 'bootstrapped a new organisation with a generated Admin API key' : 'bootstrapped a new organisation with GATEWAY_BOOTSTRAP_ADMIN_KEY')
    if (generated && settings.print) process.stdout.write(bootstrapBanner(secret, settings.publicUrl))
  }
}

function principalOf(record: ApiKeyRecord, credentialHeader: Principal['credentialHeader']): Principal {
  return {
    kind: 'api-key',
    keyId: record.id,
    keyType: record.type,
    organisationId: record.organisationId,
    workspaceId: record.workspaceId,
    userId: record.userId,
    scopes: new Set(record.scopes.map(normaliseScope)),
    credentialHeader,
  }
}

function bootstrapBanner(secret: string, url: string): string {
  return [
    '',
    '================================================================================',
    ' First start: created an organisation, a default workspace and an Admin API key.',
    ' This key is shown ONCE. Store it now:',
    '',
    `   ${secret}`,
    '',
    ' Make a workspace and a data-plane key with it:',
    `   curl -s -X POST ${url}/v1/admin/workspaces -H 'x-gateway-api-key: ${secret}' \\`,
    `     -H 'content-type: application/json' -d '{"name":"my-workspace"}'`,
    `   curl -s -X POST ${url}/v1/api-keys/workspace/service -H 'x-gateway-api-key: ${secret}' \\`,
    `     -H 'content-type: application/json' \\`,
    `     -d '{"name":"my-app","workspace_id":"<id from above>","scopes":["completions.write"]}'`,
    ' Then call a provider through the gateway with that key:',
    `   curl -s ${url}/v1/chat/completions -H 'x-gateway-api-key: <workspace key>' \\`,
    `     -H 'x-gateway-provider: openai' -H 'authorization: Bearer $OPENAI_API_KEY' \\`,
    `     -H 'content-type: application/json' -d '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Hello"}]}'`,
    '================================================================================',
    '',
  ].join('\n')
}
