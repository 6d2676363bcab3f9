/**
 * auth: who is calling.
 * Phases: onRequest (priority 1000), start (bootstrap). Writes `ctx.principal` and
 * `ctx.gatewayCredential` (the presented secret, so forward never sends it upstream); reads
 * `ctx.headers` and `ctx.route` (public routes, such as invite links, need no credential).
 * Reads the credential from `x-gateway-api-key`, else `Authorization: Bearer`. On the data plane a
 * Bearer that is neither a gateway key (`gw-…`) nor a JWT is a provider key sent without a gateway
 * key: 401 "Missing gateway API key" naming `x-gateway-api-key`, with no store lookup.
 * - An API key is looked up by SHA-256 in the admin store through an in-process cache (evicted by
 *   `api-keys` change notifications). A rotated-out secret is accepted until the key's transition
 *   deadline (`previousKeyExpiresAt`). The cache is core/read-through-cache.ts (bounded by
 *   `maxCacheEntries`, fresh for `cacheTtlMs`, unknown secrets for `negativeCacheTtlMs`): concurrent
 *   misses of one hash share one store query, and a notification that arrives while that query runs
 *   keeps its answer out of the cache, so a key revoked during a slow lookup is not cached again.
 * - A JWT (JWS compact form) is verified instead (jwt-verifier.ts): RS256, `kid` required, against
 *   the organisation's JWKS, and its `iss` / `aud` when the settings name them; organisations and
 *   workspaces are cached and evicted by `organisations` / `workspaces` change notifications.
 * Failure policy: fails closed. A store error with nothing cached is 503; a stale cached entry is
 * used while the store is unreachable.
 * Start: on an empty store, creates the organisation, its owner, a default workspace and an Admin
 * API key (from `bootstrap.adminKey`, or generated and printed once); then applies the configured
 * bootstrap JWT settings (`GATEWAY_JWKS_URL` / `GATEWAY_JWKS`, with `GATEWAY_JWT_ISSUER` /
 * `GATEWAY_JWT_AUDIENCE`) to the first organisation.
 */
import type { ApiKeyRecord, WorkspaceRecord } from '../../core/admin-records.js'
import { CHANGE_CHANNELS } from '../../core/channels.js'
import type { Principal, RequestContext } from '../../core/context.js'
import { ERRORS, gatewayError, type GatewayError } from '../../core/errors.js'
import type { GatewayPlugin } from '../../core/plugin.js'
import type { AdminStore, ChangeNotifier, OutboundFetch } from '../../core/ports.js'
import { ReadThroughCache } from '../../core/read-through-cache.js'
import { normaliseScope } from '../../core/scopes.js'
import { hashSecret } from '../../core/secrets.js'
import type { Clock, Logger } from '../../core/service.js'
import { applyBootstrapJwt, bootstrapBanner, seedFirstStart } from './bootstrap.js'
import type { AuthConfig } from './config.js'
import { subjectsOf } from './subjects.js'
import { JwtVerifier, parseJwtHeader, type JwtHeader } from './jwt-verifier.js'

/** A cached lookup of one presented secret (by its hash). */
export interface KeyCacheEntry {
  /** `null` remembers an unknown (or no longer accepted) secret. */
  readonly record: ApiKeyRecord | null
  readonly principal: Principal | null
  /** `record.expiresAt` parsed once (epoch ms; `Infinity` when the key never expires). */
  readonly expiresAtMs: number
  /**
   * Until when this secret is accepted at all (epoch ms): `Infinity` for the key's current secret,
   * the transition deadline for a rotated-out one. Past it the secret is simply invalid.
   */
  readonly acceptedUntilMs: number
  readonly freshUntil: number
}

const MISSING_KEY = gatewayError(ERRORS.GW_AUTH_KEY_MISSING)
const INVALID_KEY = gatewayError(ERRORS.GW_AUTH_KEY_INVALID)
const EXPIRED_KEY = gatewayError(ERRORS.GW_AUTH_KEY_EXPIRED)

/**
 * The cache entry for `record`, found by the secret whose hash is `hash`. A match on the previous
 * (rotated-out) hash is accepted only until `previousKeyExpiresAt`; once that passed, or without a
 * deadline, the secret is as good as unknown.
 */
export function keyCacheEntry(
  record: ApiKeyRecord | null,
  hash: string,
  now: number,
  ttlMs: number,
  negativeTtlMs: number,
  workspace: WorkspaceRecord | null = null,
): KeyCacheEntry {
  const unknown: KeyCacheEntry = {
    record: null,
    principal: null,
    expiresAtMs: 0,
    acceptedUntilMs: 0,
    freshUntil: now + negativeTtlMs,
  }
  if (record === null) return unknown
  let acceptedUntilMs = Number.POSITIVE_INFINITY
  if (record.keyHash !== hash) {
    if (record.previousKeyHash !== hash || record.previousKeyExpiresAt === null) return unknown
    acceptedUntilMs = Date.parse(record.previousKeyExpiresAt)
    if (!(acceptedUntilMs > now)) return unknown
  }
  return {
    record,
    principal: principalOf(record, workspace),
    expiresAtMs: record.expiresAt === null ? Number.POSITIVE_INFINITY : Date.parse(record.expiresAt),
    acceptedUntilMs,
    freshUntil: now + ttlMs,
  }
}

/** Admits or refuses a request with a cached key entry at `now`. */
export function admitKey(entry: KeyCacheEntry, now: number): Principal | GatewayError {
  const { record, principal } = entry
  if (record === null || principal === null || entry.acceptedUntilMs <= now) return INVALID_KEY
  if (entry.expiresAtMs <= now || record.status === 'expired') return EXPIRED_KEY
  return principal
}

export class AuthPlugin implements GatewayPlugin {
  readonly #config: AuthConfig
  readonly #store: AdminStore
  readonly #notifier: ChangeNotifier
  readonly #clock: Clock
  readonly #logger: Logger
  /** API keys by the hash of the presented secret; misses of one hash share one store lookup. */
  readonly #keys: ReadThroughCache<string, KeyCacheEntry>
  /** The loader of `#keys`, bound once so a miss builds no closure. */
  readonly #loadKey = (hash: string): Promise<KeyCacheEntry> => this.#load(hash)
  readonly #jwt: JwtVerifier
  #unsubscribe: Array<() => void> = []

  /** `outbound` fetches remote JWKS URLs through the custom-host connect policy (see `OutboundFetch`). */
  constructor(config: AuthConfig, store: AdminStore, notifier: ChangeNotifier, clock: Clock, logger: Logger, outbound: OutboundFetch | null = null) {
    this.#config = config
    this.#store = store
    this.#notifier = notifier
    this.#clock = clock
    this.#logger = logger
    this.#keys = new ReadThroughCache({
      maxEntries: config.maxCacheEntries,
      // keyCacheEntry applied cacheTtlMs or negativeCacheTtlMs when the lookup answered.
      freshUntil: (entry) => entry.freshUntil,
      staleOnError: (error) => logger.warn({ err: error }, 'admin store unreachable: using a stale cached API key'),
      clock,
    })
    this.#jwt = new JwtVerifier(store, clock, logger, {
      cacheTtlMs: config.cacheTtlMs,
      negativeCacheTtlMs: config.negativeCacheTtlMs,
      // Organisations and workspaces are few; the bound only stops floods of made-up claims.
      maxCacheEntries: Math.min(config.maxCacheEntries, 10_000),
      ...config.jwt,
      ...(outbound === null ? {} : { fetch: outbound.fetch }),
    })
  }

  async start(): Promise<void> {
    this.#unsubscribe = [
      this.#notifier.subscribe(CHANGE_CHANNELS.apiKeys, (message) => (message === '*' ? this.#keys.clear() : this.#keys.evict(message))),
      this.#notifier.subscribe(CHANGE_CHANNELS.organisations, (message) => this.#jwt.evictOrganisation(message)),
      this.#notifier.subscribe(CHANGE_CHANNELS.workspaces, (message) => {
        this.#jwt.evictWorkspace(message)
        this.#evictWorkspaceKeys(message)
      }),
    ]
    const settings = this.#config.bootstrap
    const generated = await seedFirstStart(this.#store, settings, this.#clock.now(), this.#logger)
    if (generated !== null && settings.print) process.stdout.write(bootstrapBanner(generated, settings.publicUrl))
    await applyBootstrapJwt(this.#store, this.#notifier, settings, this.#clock.now(), this.#logger)
  }

  async close(): Promise<void> {
    for (const unsubscribe of this.#unsubscribe) unsubscribe()
    this.#unsubscribe = []
    this.#keys.clear()
    this.#jwt.clear()
  }

  onRequest(ctx: RequestContext): GatewayError | undefined | Promise<GatewayError | undefined> {
    if (ctx.route.public) return undefined
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
    // Per request, not on the cached principal: forward drops every header that carries it.
    ctx.gatewayCredential = secret
    const now = this.#clock.now()
    // API keys never contain dots; only a dotted credential can be a JWT.
    if (secret.includes('.')) {
      const verified = this.#jwt.cached(secret, now)
      if (verified !== undefined) {
        ctx.principal = withHeader(verified, credentialHeader)
        return undefined
      }
      const header = parseJwtHeader(secret)
      if (header !== null) return this.#verifyJwt(ctx, secret, header, credentialHeader)
    }
    // Gateway keys start with `gw-`; only the Admin API's bootstrap key may have another form.
    if (credentialHeader === 'authorization' && ctx.route.group !== 'admin' && !secret.startsWith('gw-')) {
      return gatewayError(ERRORS.GW_AUTH_KEY_MISSING, 'Missing gateway API key: send it in x-gateway-api-key (Authorization holds a provider key, not a gateway key)', {
        param: 'x-gateway-api-key',
      })
    }
    const hash = hashSecret(secret)
    const cached = this.#keys.get(hash, now)
    if (cached !== undefined) return this.#admit(ctx, cached, credentialHeader, now)
    return this.#lookup(ctx, hash, credentialHeader)
  }

  async #verifyJwt(ctx: RequestContext, token: string, header: JwtHeader, credentialHeader: Principal['credentialHeader']): Promise<GatewayError | undefined> {
    const result = await this.#jwt.verify(token, header, credentialHeader)
    if (result instanceof Error) return result
    // A verification shared with a request that sent the token under the other header.
    ctx.principal = withHeader(result, credentialHeader)
    return undefined
  }

  /** A miss: the store lookup (shared; a stale entry while the store is unreachable), else 503. */
  async #lookup(ctx: RequestContext, hash: string, credentialHeader: Principal['credentialHeader']): Promise<GatewayError | undefined> {
    let entry: KeyCacheEntry
    try {
      entry = await this.#keys.load(hash, this.#loadKey)
    } catch (error) {
      this.#logger.error({ err: error }, 'admin store unreachable: refusing the request')
      return gatewayError(ERRORS.GW_AUTH_UNAVAILABLE)
    }
    return this.#admit(ctx, entry, credentialHeader, this.#clock.now())
  }

  /** One store lookup of `hash` (rejects when the store is unreachable). */
  async #load(hash: string): Promise<KeyCacheEntry> {
    const record = await this.#store.findApiKeyByHash(hash)
    // The workspace's limits apply to its keys' requests too.
    const workspace = record?.workspaceId != null ? await this.#store.findWorkspace(record.organisationId, record.workspaceId) : null
    return keyCacheEntry(record, hash, this.#clock.now(), this.#config.cacheTtlMs, this.#config.negativeCacheTtlMs, workspace)
  }

  #admit(ctx: RequestContext, entry: KeyCacheEntry, credentialHeader: Principal['credentialHeader'], now: number): GatewayError | undefined {
    const admitted = admitKey(entry, now)
    if (admitted instanceof Error) return admitted
    ctx.principal = withHeader(admitted, credentialHeader)
    return undefined
  }

  /** Keys carry their workspace's limits: drop the cached keys of a changed workspace (`*`: all). */
  #evictWorkspaceKeys(workspaceId: string): void {
    // evictWhere also detaches every running lookup: its key's workspace is unknown until it returns.
    if (workspaceId === '*') this.#keys.clear()
    else this.#keys.evictWhere((entry) => entry.record?.workspaceId === workspaceId)
  }
}

/** Cached principals keep the header of their first use; most callers always use the same one. */
function withHeader(principal: Principal, credentialHeader: Principal['credentialHeader']): Principal {
  return principal.credentialHeader === credentialHeader ? principal : { ...principal, credentialHeader }
}

function principalOf(record: ApiKeyRecord, workspace: WorkspaceRecord | null): Principal {
  return {
    kind: 'api-key',
    keyId: record.id,
    keyType: record.type,
    organisationId: record.organisationId,
    workspaceId: record.workspaceId,
    userId: record.userId,
    scopes: new Set(record.scopes.map(normaliseScope)),
    credentialHeader: 'x-gateway-api-key',
    limitSubjects: subjectsOf(record, workspace),
    defaultConfig: record.defaults?.configId ?? workspace?.defaults?.configId ?? null,
  }
}
