/**
 * JWT verification for the auth plugin (API.md §1): a JWS compact token stands in for an API key.
 *
 * Order of work, cheapest refusal first: the header must say RS256 and carry a `kid` (no I/O); the
 * unverified payload names the organisation, whose JWT settings pick the key set (a store read,
 * cached); the signature, the time claims and, when the settings name them, the issuer (`iss` must
 * equal it) and audience (`aud` must contain one of them) are checked with `jose`; only then is the workspace
 * claim trusted and resolved (cached). A verified token is cached by its text until its `exp`.
 *
 * Caches: organisations, the first organisation, workspaces and verified tokens are each a
 * core/read-through-cache.ts. Concurrent misses of one organisation or workspace share one store
 * query, and concurrent first uses of one token share one verification. An eviction that arrives
 * while a read runs keeps its answer out of the cache; every eviction also detaches the token
 * verifications in flight, so a token whose verification overlapped one is not cached, and settings
 * changed mid-verification (a JWKS replaced, an issuer required) apply to the token's next use
 * instead of after its `exp`.
 *
 * Failure policy: fails closed. A store error with nothing cached, or a JWKS URL that cannot be
 * fetched, is 503 `GW_AUTH_UNAVAILABLE`; every other refusal is 401 with a message that names the
 * problem and never repeats the token.
 */
import {
  createLocalJWKSet,
  createRemoteJWKSet,
  customFetch,
  decodeJwt,
  jwtVerify,
  type JWTPayload,
  type JWTVerifyGetKey,
} from 'jose'
import type { JwtSettings, OrganisationRecord, WorkspaceRecord } from '../../core/admin-records.js'
import type { Principal } from '../../core/context.js'
import { ERRORS, gatewayError, GatewayError } from '../../core/errors.js'
import type { AdminStore } from '../../core/ports.js'
import { ReadThroughCache, ttlFreshness } from '../../core/read-through-cache.js'
import { normaliseScope } from '../../core/scopes.js'
import type { Clock, Logger } from '../../core/service.js'
import { workspaceSubject } from './subjects.js'

/** The only signature algorithm accepted (API.md §1). */
const ALGORITHM = 'RS256'
/** Seconds of clock skew tolerated on `exp` and `nbf`. */
const CLOCK_TOLERANCE_SECONDS = 5
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
const BASE64URL = /^[A-Za-z0-9_-]*$/

/** The store reads the verifier needs. */
export type JwtStore = Pick<AdminStore, 'findFirstOrganisation' | 'findOrganisation' | 'findWorkspace'>

export interface JwtVerifierOptions {
  /** How long an organisation or workspace read stays cached (change notifications evict it sooner). */
  readonly cacheTtlMs: number
  /** How long an unknown organisation or workspace is remembered as unknown. */
  readonly negativeCacheTtlMs: number
  /** Bound of the organisation and workspace caches each. */
  readonly maxCacheEntries: number
  readonly jwksCacheMaxAgeMs: number
  readonly jwksCooldownMs: number
  readonly jwksTimeoutMs: number
  readonly maxTokenCacheEntries: number
  /**
   * What fetches a JWKS URL: the gateway's guarded outbound fetch (the connect-time SSRF check of
   * custom hosts, so a URL whose name re-resolves to a refused address is not reached). Default:
   * the global `fetch` (tests only).
   */
  readonly fetch?: typeof globalThis.fetch
}

/** The protected header fields the verifier looks at before any I/O. */
export interface JwtHeader {
  readonly alg: string
  readonly kid: unknown
}

type KeySet = JWTVerifyGetKey

/** A verified token: kept until its `exp`. */
interface TokenEntry {
  readonly principal: Principal
  /** `exp` in epoch ms. */
  readonly expiresAtMs: number
}

/** What verifying a token once answers; refusals are shared by concurrent uses but never kept. */
type Verification = TokenEntry | GatewayError

/** Key set of one organisation's settings; rebuilt when its settings change (`updatedAt`). */
interface KeySetEntry {
  readonly updatedAt: string
  /** `null` when the stored static JWKS is unusable (logged once). */
  readonly keySet: KeySet | null
  readonly remote: boolean
  readonly url: string | null
}

/**
 * The JWS compact header of `credential` when it looks like a JWT (three base64url parts, a JSON
 * header with a string `alg`), else `null`. API keys never contain dots, so they leave at once.
 */
export function parseJwtHeader(credential: string): JwtHeader | null {
  const first = credential.indexOf('.')
  if (first <= 0) return null
  const second = credential.indexOf('.', first + 1)
  if (second < 0 || credential.indexOf('.', second + 1) >= 0) return null
  const encoded = credential.slice(0, first)
  if (!BASE64URL.test(encoded) || !BASE64URL.test(credential.slice(first + 1, second)) || !BASE64URL.test(credential.slice(second + 1))) return null
  let header: unknown
  try {
    header = JSON.parse(Buffer.from(encoded, 'base64url').toString('utf8'))
  } catch {
    return null
  }
  if (header === null || typeof header !== 'object' || Array.isArray(header)) return null
  const { alg, kid } = header as Record<string, unknown>
  return typeof alg === 'string' ? { alg, kid } : null
}

function tokenInvalid(message: string): GatewayError {
  return gatewayError(ERRORS.GW_AUTH_TOKEN_INVALID, message)
}

const WRONG_ALGORITHM = tokenInvalid('Invalid token: JWTs must be signed with RS256')
const MISSING_KID = tokenInvalid('Invalid token: the JWT header has no kid')
const MALFORMED = tokenInvalid('Invalid token: the JWT is malformed')
const NOT_CONFIGURED = tokenInvalid('JWT authentication is not configured for this organisation')
const UNKNOWN_ORGANISATION = tokenInvalid('Invalid token: unknown organisation')
const NO_ORGANISATION = tokenInvalid('Invalid token: no organisation claim (gateway_oid or organisation_id)')
const NO_WORKSPACE = tokenInvalid('Invalid token: no workspace claim (gateway_workspace or workspace_slug)')
const UNKNOWN_WORKSPACE = tokenInvalid('Invalid token: unknown workspace')
const BAD_SCOPE = tokenInvalid('Invalid token: scope must be a space-separated string or an array of strings, scopes an array of strings')
const UNUSABLE_JWKS = tokenInvalid('Invalid token: the JWKS configured for this organisation is unusable')
const JWKS_UNAVAILABLE = gatewayError(ERRORS.GW_AUTH_UNAVAILABLE, 'The JWKS of this organisation could not be fetched')
const EXPIRED = gatewayError(ERRORS.GW_AUTH_TOKEN_EXPIRED)
// The expected values are not repeated: they tell an unauthenticated caller nothing it needs.
const MISSING_ISSUER = tokenInvalid('Invalid token: the JWT has no iss claim, and this organisation requires an issuer')
const WRONG_ISSUER = tokenInvalid('Invalid token: iss is not the issuer this organisation accepts')
const MISSING_AUDIENCE = tokenInvalid('Invalid token: the JWT has no aud claim, and this organisation requires an audience')
const WRONG_AUDIENCE = tokenInvalid('Invalid token: aud does not name an audience this organisation accepts')

export class JwtVerifier {
  readonly #store: JwtStore
  readonly #clock: Clock
  readonly #logger: Logger
  readonly #options: JwtVerifierOptions
  /**
   * Verified tokens by their text. Every eviction below also detaches the verifications in flight
   * (`evictWhere`/`clear`): one that overlapped an eviction may have used evicted settings.
   */
  readonly #tokens: ReadThroughCache<string, Verification>
  /** Organisations by id (lower case). */
  readonly #organisations: ReadThroughCache<string, OrganisationRecord | null>
  /** The first organisation (one key), for tokens without an organisation claim. */
  readonly #firstOrganisation: ReadThroughCache<'first', OrganisationRecord | null>
  /** Workspaces by `<organisation id> <slug>`. */
  readonly #workspaces: ReadThroughCache<string, WorkspaceRecord | null>
  readonly #loadOrganisation: (id: string) => Promise<OrganisationRecord | null>
  readonly #loadFirstOrganisation: () => Promise<OrganisationRecord | null>
  /** Memo tables built without I/O (no loads, no TTL): bounded maps. */
  readonly #keySets = new Map<string, KeySetEntry>()
  /** One remote set per URL: it holds the fetched JWKS and refetches on an unknown `kid`. */
  readonly #remoteSets = new Map<string, KeySet>()

  constructor(store: JwtStore, clock: Clock, logger: Logger, options: JwtVerifierOptions) {
    this.#store = store
    this.#clock = clock
    this.#logger = logger
    this.#options = options
    const stale = (error: unknown): void => logger.warn({ err: error }, 'admin store unreachable: using a stale cached JWT lookup')
    const records = ttlFreshness(options.cacheTtlMs, options.negativeCacheTtlMs)
    this.#tokens = new ReadThroughCache<string, Verification>({
      maxEntries: options.maxTokenCacheEntries,
      freshUntil: (verification) => (verification instanceof GatewayError ? 0 : verification.expiresAtMs),
      // Past its `exp` a token is refused, store or no store.
      staleOnError: null,
      clock,
    })
    const maxEntries = options.maxCacheEntries
    this.#organisations = new ReadThroughCache<string, OrganisationRecord | null>({ maxEntries, freshUntil: records, staleOnError: stale, clock })
    // An empty store is remembered as long as an organisation (the first start seeds one).
    const first = ttlFreshness(options.cacheTtlMs, options.cacheTtlMs)
    this.#firstOrganisation = new ReadThroughCache<'first', OrganisationRecord | null>({ maxEntries: 1, freshUntil: first, staleOnError: stale, clock })
    this.#workspaces = new ReadThroughCache<string, WorkspaceRecord | null>({ maxEntries, freshUntil: records, staleOnError: stale, clock })
    this.#loadOrganisation = (id) => this.#store.findOrganisation(id)
    this.#loadFirstOrganisation = () => this.#store.findFirstOrganisation()
  }

  /**
   * The principal of a token verified before and not yet expired, or `undefined`. It carries the
   * credential header of the request that verified it.
   */
  cached(token: string, now: number): Principal | undefined {
    const verified = this.#tokens.get(token, now)
    // Refusals are never kept; the check narrows the type.
    return verified === undefined || verified instanceof GatewayError ? undefined : verified.principal
  }

  /**
   * Verifies `token` (whose header `parseJwtHeader` returned) and resolves its principal. Concurrent
   * uses of one token share one verification: the principal may carry the other request's
   * `credentialHeader`.
   */
  async verify(token: string, header: JwtHeader, credentialHeader: Principal['credentialHeader']): Promise<Principal | GatewayError> {
    if (header.alg !== ALGORITHM) return WRONG_ALGORITHM
    if (typeof header.kid !== 'string' || header.kid.length === 0) return MISSING_KID
    const verification = await this.#tokens.load(token, () => this.#verifyToken(token, credentialHeader))
    return verification instanceof GatewayError ? verification : verification.principal
  }

  /** One verification of a token whose header passed: the loader of `#tokens`. */
  async #verifyToken(token: string, credentialHeader: Principal['credentialHeader']): Promise<Verification> {
    let unverified: JWTPayload
    try {
      unverified = decodeJwt(token)
    } catch {
      return MALFORMED
    }
    const organisation = await this.#organisationOf(unverified)
    if (!isOrganisation(organisation)) return organisation
    const keys = this.#keySetOf(organisation)
    if (!isKeySetEntry(keys)) return keys

    // `#keySetOf` returned a key set, so the organisation has settings.
    const { issuer, audience } = organisation.jwt as JwtSettings
    let payload: JWTPayload
    try {
      const now = this.#clock.now()
      ;({ payload } = await jwtVerify(token, keys.keySet as KeySet, {
        algorithms: [ALGORITHM],
        clockTolerance: CLOCK_TOLERANCE_SECONDS,
        requiredClaims: ['exp'],
        currentDate: new Date(now),
        // jose only checks (and requires) `iss` / `aud` when these are defined.
        issuer: issuer ?? undefined,
        audience: audience !== null && audience.length > 0 ? (audience as string[]) : undefined,
      }))
    } catch (error) {
      return this.#refusal(error, keys.remote, organisation.id)
    }

    const slug = stringClaim(payload, 'gateway_workspace', 'workspace_slug')
    if (slug === null) return NO_WORKSPACE
    const workspace = await this.#workspaceOf(organisation.id, slug)
    if (!isWorkspace(workspace)) return workspace
    const scopes = scopesOf(payload)
    if (scopes === null) return BAD_SCOPE

    const principal: Principal = {
      kind: 'jwt',
      keyId: stringClaim(payload, 'email_id', 'sub', 'uid') ?? 'jwt',
      keyType: 'workspace-user',
      organisationId: organisation.id,
      workspaceId: workspace.id,
      userId: null,
      scopes,
      credentialHeader,
      limitSubjects: [workspaceSubject(workspace)],
      defaultConfig: workspace.defaults?.configId ?? null,
    }
    // `requiredClaims` guarantees a numeric `exp`.
    return { principal, expiresAtMs: (payload.exp as number) * 1000 }
  }

  /** Forgets an organisation (its JWT settings changed), its key set and the tokens it admitted; `*` forgets all. */
  evictOrganisation(organisationId: string): void {
    if (organisationId === '*') return this.clear()
    const url = this.#organisations.peek(organisationId)?.jwt?.jwksUrl
    this.#organisations.evict(organisationId)
    // Also detaches a running first-organisation read: which organisation it returns is unknown
    // until it does.
    this.#firstOrganisation.evictWhere((record) => record?.id === organisationId)
    const keys = this.#keySets.get(organisationId)
    this.#keySets.delete(organisationId)
    // The next token refetches the JWKS: re-saving the same URL is how an operator forces a refresh.
    if (keys?.url != null) this.#remoteSets.delete(keys.url)
    if (url != null) this.#remoteSets.delete(url)
    this.#tokens.evictWhere((verified) => verified instanceof GatewayError || verified.principal.organisationId === organisationId)
  }

  /** Forgets a workspace (renamed, limits changed, deleted) and the tokens it admitted; `*` forgets all. */
  evictWorkspace(workspaceId: string): void {
    if (workspaceId === '*') {
      this.#workspaces.clear()
      this.#tokens.clear()
      return
    }
    // evictWhere detaches running reads too: they are keyed by slug, and which workspace they return
    // is unknown until they do.
    this.#workspaces.evictWhere((record) => record?.id === workspaceId)
    this.#tokens.evictWhere((verified) => verified instanceof GatewayError || verified.principal.workspaceId === workspaceId)
  }

  clear(): void {
    this.#tokens.clear()
    this.#organisations.clear()
    this.#firstOrganisation.clear()
    this.#workspaces.clear()
    this.#keySets.clear()
    this.#remoteSets.clear()
  }

  async #organisationOf(payload: JWTPayload): Promise<OrganisationRecord | GatewayError> {
    const claimed = payload.gateway_oid ?? payload.organisation_id
    if (claimed === undefined) return this.#firstOrganisationRecord()
    // Ids are UUIDs; anything else cannot name an organisation and must not reach the store.
    if (typeof claimed !== 'string' || !UUID.test(claimed)) return UNKNOWN_ORGANISATION
    const id = claimed.toLowerCase()
    let record = this.#organisations.get(id, this.#clock.now())
    if (record === undefined) {
      try {
        record = await this.#organisations.load(id, this.#loadOrganisation)
      } catch (error) {
        return storeDown(this.#logger, error)
      }
    }
    return record ?? UNKNOWN_ORGANISATION
  }

  /** Single-organisation deployments: a token without an organisation claim belongs to the first one. */
  async #firstOrganisationRecord(): Promise<OrganisationRecord | GatewayError> {
    let record = this.#firstOrganisation.get('first', this.#clock.now())
    if (record === undefined) {
      try {
        record = await this.#firstOrganisation.load('first', this.#loadFirstOrganisation)
      } catch (error) {
        return storeDown(this.#logger, error)
      }
    }
    return record ?? NO_ORGANISATION
  }

  async #workspaceOf(organisationId: string, slug: string): Promise<WorkspaceRecord | GatewayError> {
    const key = `${organisationId} ${slug}`
    let record = this.#workspaces.get(key, this.#clock.now())
    if (record === undefined) {
      try {
        record = await this.#workspaces.load(key, () => this.#store.findWorkspace(organisationId, slug))
      } catch (error) {
        return storeDown(this.#logger, error)
      }
    }
    return record ?? UNKNOWN_WORKSPACE
  }

  #keySetOf(organisation: OrganisationRecord): KeySetEntry | GatewayError {
    const settings = organisation.jwt
    if (settings === null || (settings.jwksUrl === null && settings.jwks === null)) return NOT_CONFIGURED
    const cached = this.#keySets.get(organisation.id)
    if (cached !== undefined && cached.updatedAt === settings.updatedAt) return cached.keySet === null ? UNUSABLE_JWKS : cached
    let entry: KeySetEntry
    if (settings.jwksUrl !== null) {
      entry = { updatedAt: settings.updatedAt, keySet: this.#remoteSet(settings.jwksUrl), remote: true, url: settings.jwksUrl }
    } else {
      let keySet: KeySet | null = null
      try {
        keySet = createLocalJWKSet(settings.jwks as Parameters<typeof createLocalJWKSet>[0])
      } catch (error) {
        this.#logger.warn({ err: error, organisationId: organisation.id }, 'the static JWKS of this organisation is unusable')
      }
      entry = { updatedAt: settings.updatedAt, keySet, remote: false, url: null }
    }
    setBounded(this.#keySets, organisation.id, entry, this.#options.maxCacheEntries)
    return entry.keySet === null ? UNUSABLE_JWKS : entry
  }

  #remoteSet(url: string): KeySet {
    let keySet = this.#remoteSets.get(url)
    if (keySet === undefined) {
      keySet = createRemoteJWKSet(new URL(url), {
        cacheMaxAge: this.#options.jwksCacheMaxAgeMs,
        cooldownDuration: this.#options.jwksCooldownMs,
        timeoutDuration: this.#options.jwksTimeoutMs,
        ...(this.#options.fetch === undefined ? {} : { [customFetch]: this.#options.fetch }),
      })
      setBounded(this.#remoteSets, url, keySet, this.#options.maxCacheEntries)
    }
    return keySet
  }

  /** Maps a `jose` verification failure to what the client is told. */
  #refusal(error: unknown, remote: boolean, organisationId: string): GatewayError {
    const code = (error as { code?: unknown } | null)?.code
    const claim = (error as { claim?: unknown } | null)?.claim
    const reason = (error as { reason?: unknown } | null)?.reason
    switch (code) {
      case 'ERR_JWT_EXPIRED':
        return EXPIRED
      case 'ERR_JWT_CLAIM_VALIDATION_FAILED':
        if (claim === 'exp') return tokenInvalid(reason === 'missing' ? 'Invalid token: the JWT has no exp claim' : 'Invalid token: exp must be a number')
        if (claim === 'nbf') return tokenInvalid(reason === 'check_failed' ? 'Invalid token: the JWT is not valid yet (nbf)' : 'Invalid token: nbf must be a number')
        if (claim === 'iat') return tokenInvalid('Invalid token: iat is not valid')
        if (claim === 'iss') return reason === 'missing' ? MISSING_ISSUER : WRONG_ISSUER
        if (claim === 'aud') return reason === 'missing' ? MISSING_AUDIENCE : WRONG_AUDIENCE
        return tokenInvalid('Invalid token: a claim is not valid')
      case 'ERR_JOSE_ALG_NOT_ALLOWED':
        return WRONG_ALGORITHM
      case 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED':
        return tokenInvalid('Invalid token: the JWT signature does not verify')
      case 'ERR_JWKS_NO_MATCHING_KEY':
        return tokenInvalid("Invalid token: no key in the organisation's JWKS matches the JWT's kid")
      case 'ERR_JWKS_MULTIPLE_MATCHING_KEYS':
        return tokenInvalid("Invalid token: several keys in the organisation's JWKS match the JWT's kid")
      case 'ERR_JWS_INVALID':
      case 'ERR_JWT_INVALID':
        return MALFORMED
      case 'ERR_JWKS_TIMEOUT':
        this.#logger.warn({ organisationId }, 'JWKS fetch timed out')
        return JWKS_UNAVAILABLE
      default:
        break
    }
    // jose refuses RSA keys under 2048 bits with a TypeError naming modulusLength.
    if (error instanceof TypeError && error.message.includes('modulusLength')) {
      return tokenInvalid('Invalid token: the signing key is shorter than 2048 bits')
    }
    if (remote) {
      // Network errors, non-200 answers and unparsable documents: the issuer is unreachable or
      // broken, which says nothing about the token itself.
      this.#logger.warn({ err: error, organisationId }, 'JWKS fetch failed')
      return JWKS_UNAVAILABLE
    }
    this.#logger.warn({ err: error, organisationId }, 'JWT verification failed')
    return UNUSABLE_JWKS
  }
}

/** The store is unreachable and nothing is cached (a stale entry would have answered): 503, fail closed. */
function storeDown(logger: Logger, error: unknown): GatewayError {
  logger.error({ err: error }, 'admin store unreachable: refusing the JWT')
  return gatewayError(ERRORS.GW_AUTH_UNAVAILABLE)
}

function isOrganisation(value: OrganisationRecord | GatewayError): value is OrganisationRecord {
  return !(value instanceof Error)
}

function isWorkspace(value: WorkspaceRecord | GatewayError): value is WorkspaceRecord {
  return !(value instanceof Error)
}

function isKeySetEntry(value: KeySetEntry | GatewayError): value is KeySetEntry {
  return !(value instanceof Error)
}

/** The first claim of `names` holding a non-empty string. */
function stringClaim(payload: JWTPayload, ...names: readonly string[]): string | null {
  for (const name of names) {
    const value = payload[name]
    if (typeof value === 'string' && value.length > 0) return value
  }
  return null
}

/** `scope` (space-separated, or an array) and `scopes` (array), `gateway.` prefixes removed; `null` when malformed. */
function scopesOf(payload: JWTPayload): Set<string> | null {
  const scopes = new Set<string>()
  const { scope, scopes: list } = payload as { scope?: unknown; scopes?: unknown }
  if (typeof scope === 'string') {
    for (const item of scope.split(/\s+/)) if (item.length > 0) scopes.add(normaliseScope(item))
  } else if (scope !== undefined && !addAll(scopes, scope)) {
    return null
  }
  if (list !== undefined && !addAll(scopes, list)) return null
  return scopes
}

function addAll(scopes: Set<string>, value: unknown): boolean {
  if (!Array.isArray(value)) return false
  for (const item of value) {
    if (typeof item !== 'string') return false
    if (item.length > 0) scopes.add(normaliseScope(item))
  }
  return true
}

/** `map.set` that first drops the oldest entry (Maps iterate in insertion order) when full. */
function setBounded<K, V>(map: Map<K, V>, key: K, value: V, max: number): void {
  if (!map.has(key) && map.size >= max) {
    const oldest = map.keys().next()
    if (!oldest.done) map.delete(oldest.value)
  }
  map.set(key, value)
}
