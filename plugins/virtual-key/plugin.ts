/**
 * virtual-key: resolves `x-gateway-virtual-key: <slug>`, and each config target's `virtual_key`, to
 * the provider credential stored under it.
 * Phases: onRequest (priority 800: after auth, scope-check and routing, before rate-limit and
 * budget); onAttempt (priority 800, first of the attempt hooks: a config target's virtual key, per
 * upstream attempt); start (subscriptions, master key check).
 * Reads `ctx.principal`, `ctx.headers`, `ctx.prompt` (a prompt template's virtual key, written by
 * prompt-render at priority 850, is resolved in place of the header), and per attempt
 * `attempt.target.virtualKey` and `ctx.credential`; writes `ctx.credential` (provider, decrypted
 * key, custom host, model config: forward uses it instead of the provider headers) and
 * `ctx.virtualKey` (the key's rate and usage limits), and per attempt `attempt.credential` and `attempt.virtualKey` (the same, for that
 * attempt only: rate-limit and budget check that key's limits for the attempt it serves).
 * I/O: admin store lookups by slug (or UUID) within the caller's organisation, through an
 * in-process cache filled on first use (core/read-through-cache.ts: bounded by `maxCacheEntries`,
 * fresh for `cacheTtlMs`, unknown slugs for `negativeCacheTtlMs`, one lookup per slug in flight)
 * and evicted by `virtual-keys` and `workspaces` change notifications (`*` clears it); a lookup
 * still running when one arrives is neither cached nor shared with later requests. Provider keys
 * are decrypted once per cache fill; several keys are used in turn (round robin). The header, a
 * prompt's key and a config target's key share the cache, the rules and the round robin.
 * A request that also sends `x-gateway-custom-host` is refused (400 GW_REQ_INVALID, before any
 * lookup): the stored provider key goes only to its provider's endpoint or the key's own
 * `custom_host`, and silently ignoring the header would hide that from the client. A config next
 * to `x-gateway-virtual-key`, `x-gateway-custom-host` or a prompt is refused by the routing plugin in
 * its onRequest (before this plugin looks the key up), and a default config does not apply to a
 * request that names its own virtual key; onAttempt still refuses an attempt when the request already
 * holds a credential (`ctx.credential`: 400 GW_REQ_INVALID naming the fix, the virtual key goes in
 * the config's target), so a request is never limited and charged under two virtual keys.
 * Failure policy: fails closed. Unknown slug, or a key of another workspace → 404
 * GW_VIRTUAL_KEY_NOT_FOUND (never revealed); expired → 401 GW_VIRTUAL_KEY_EXPIRED; store
 * unreachable and nothing cached → 503 GW_VIRTUAL_KEY_UNAVAILABLE (a stale cached key is used while
 * it is unreachable); a credential the master key cannot open → 500 (logged, not cached). On an
 * attempt these refuse the attempt only (the router counts it as failed with that status and may
 * fall back); the 404 names the target (`param` `config.targets[1].virtual_key`).
 * Start: when the store holds a sealed secret the master key cannot open, boot fails: running on
 * would answer every virtual key with an error, and new keys would be sealed under a second key.
 */
import type { VirtualKeyRecord } from '../../core/admin-records.js'
import { CHANGE_CHANNELS } from '../../core/channels.js'
import type { Attempt, Principal, ProviderCredential, RequestContext } from '../../core/context.js'
import { ERRORS, gatewayError, GatewayError } from '../../core/errors.js'
import type { LimitSubject } from '../../core/limits.js'
import type { GatewayPlugin } from '../../core/plugin.js'
import type { AdminStore, ChangeNotifier, SecretCipher } from '../../core/ports.js'
import { ReadThroughCache } from '../../core/read-through-cache.js'
import type { RoutingTarget } from '../../core/routing-config.js'
import type { Clock, Logger } from '../../core/service.js'
import type { VirtualKeyConfig } from './config.js'

/** The client may not point a stored credential at a host of its choosing (API.md §2). */
const CUSTOM_HOST_WITH_VIRTUAL_KEY = gatewayError(
  ERRORS.GW_REQ_INVALID,
  "x-gateway-custom-host cannot be combined with x-gateway-virtual-key: the virtual key's provider key goes only to its provider or to the key's own custom_host. Drop the header, or set the virtual key's custom_host through the Admin API (PUT /v1/virtual-keys/{id} with custom_host and key)",
  { param: 'x-gateway-custom-host' },
)

/**
 * With a config the targets choose the provider: a credential the request already holds would be
 * counted and charged for attempts the config routes elsewhere, so it is refused rather than ignored.
 */
const VIRTUAL_KEY_WITH_CONFIG = gatewayError(
  ERRORS.GW_REQ_INVALID,
  'A request that names its own virtual key (x-gateway-virtual-key, or a prompt template\'s) cannot also be routed by a config: the config\'s targets choose the provider. Put the virtual key in the config\'s target ("virtual_key": "<slug>") and drop the header, or send the request without a config',
  { param: 'x-gateway-virtual-key' },
)

/** `param` of the 404 for the header (and a prompt's key, which stands in for it). */
const HEADER_PARAM = 'x-gateway-virtual-key'

/** Where a resolved key goes: the request (`ctx`) or one attempt of it; both declare these slots. */
interface CredentialSlots {
  credential: ProviderCredential | null
  virtualKey: LimitSubject | null
}

/** Slugs are short; anything longer is unknown without asking the store. */
const MAX_SLUG_LENGTH = 200

/** One cached lookup of a slug in an organisation. */
interface Entry {
  /** `null` remembers an unknown slug. */
  readonly record: VirtualKeyRecord | null
  /** One credential per provider key (at least one), decrypted. */
  readonly credentials: readonly ProviderCredential[]
  readonly subject: LimitSubject | null
  /** `record.expiresAt` parsed once (epoch ms; `Infinity` when it never expires). */
  readonly expiresAtMs: number
  /** Index of the credential the next request uses. */
  cursor: number
}

/** What one lookup answers; an error (a credential that does not decrypt) is shared, never cached. */
type Lookup = Entry | GatewayError

export class VirtualKeyPlugin implements GatewayPlugin {
  readonly #store: AdminStore
  readonly #cipher: SecretCipher
  readonly #notifier: ChangeNotifier
  readonly #clock: Clock
  readonly #logger: Logger
  /** By `<organisation id>\n<slug>`. */
  readonly #cache: ReadThroughCache<string, Lookup>
  #unsubscribe: Array<() => void> = []

  constructor(config: VirtualKeyConfig, store: AdminStore, cipher: SecretCipher, notifier: ChangeNotifier, clock: Clock, logger: Logger) {
    this.#store = store
    this.#cipher = cipher
    this.#notifier = notifier
    this.#clock = clock
    this.#logger = logger
    this.#cache = new ReadThroughCache<string, Lookup>({
      maxEntries: config.maxCacheEntries,
      freshUntil: (lookup, now) => (lookup instanceof GatewayError ? now : now + (lookup.record === null ? config.negativeCacheTtlMs : config.cacheTtlMs)),
      staleOnError: (error) => logger.warn({ err: error }, 'admin store unreachable: using a stale cached virtual key'),
      clock,
    })
  }

  async start(): Promise<void> {
    // Unknown slugs go on any virtual key change: the change may have created one. (Errors are never
    // cached; the instanceof checks only narrow the type.)
    this.#unsubscribe = [
      this.#notifier.subscribe(CHANGE_CHANNELS.virtualKeys, (message) =>
        message === '*' ? this.#cache.clear() : this.#cache.evictWhere((lookup) => lookup instanceof GatewayError || lookup.record === null || lookup.record.id === message),
      ),
      this.#notifier.subscribe(CHANGE_CHANNELS.workspaces, (message) =>
        message === '*' ? this.#cache.clear() : this.#cache.evictWhere((lookup) => lookup instanceof GatewayError || lookup.record?.workspaceId === message),
      ),
    ]
    await this.#checkMasterKey()
  }

  async close(): Promise<void> {
    for (const unsubscribe of this.#unsubscribe) unsubscribe()
    this.#unsubscribe = []
    this.#cache.clear()
  }

  onRequest(ctx: RequestContext): GatewayError | undefined | Promise<GatewayError | undefined> {
    // A prompt's virtual key (prompt-render refuses x-gateway-virtual-key next to a prompt).
    const slug = ctx.prompt?.virtualKey ?? ctx.headers['x-gateway-virtual-key']
    if (slug === undefined) return undefined
    if (ctx.headers['x-gateway-custom-host'] !== undefined) return CUSTOM_HOST_WITH_VIRTUAL_KEY
    return this.#resolve(ctx, ctx.principal, slug, null)
  }

  /** A config target's virtual key, for this attempt only (`ctx.credential` stays `null`). */
  onAttempt(ctx: RequestContext, attempt: Attempt): GatewayError | undefined | Promise<GatewayError | undefined> {
    if (ctx.credential !== null) return VIRTUAL_KEY_WITH_CONFIG
    const slug = attempt.target.virtualKey
    if (slug === null) return undefined
    return this.#resolve(attempt, ctx.principal, slug, attempt.target)
  }

  /**
   * Resolves `slug` for `principal` into `slots`: from the cache, else one store lookup. `target` is
   * the config target that names the key (`null` for the header or a prompt), for the 404's `param`.
   */
  #resolve(slots: CredentialSlots, principal: Principal | null, slug: string, target: RoutingTarget | null): GatewayError | undefined | Promise<GatewayError | undefined> {
    if (principal === null || slug.length === 0 || slug.length > MAX_SLUG_LENGTH) return notFound(slug, target)
    const cacheKey = `${principal.organisationId}\n${slug}`
    const cached = this.#cache.get(cacheKey, this.#clock.now())
    // Errors are never cached; the check only narrows the type.
    if (cached !== undefined && !(cached instanceof GatewayError)) return this.#admit(slots, cached, principal, slug, target)
    return this.#lookup(slots, principal, slug, cacheKey, target)
  }

  /** A miss: the store lookup (shared; a stale entry while the store is unreachable), else 503. */
  async #lookup(slots: CredentialSlots, principal: Principal, slug: string, cacheKey: string, target: RoutingTarget | null): Promise<GatewayError | undefined> {
    let lookup: Lookup
    try {
      lookup = await this.#cache.load(cacheKey, () => this.#fill(principal.organisationId, slug))
    } catch (error) {
      this.#logger.error({ err: error }, 'admin store unreachable: refusing the virtual key')
      return gatewayError(ERRORS.GW_VIRTUAL_KEY_UNAVAILABLE)
    }
    if (lookup instanceof GatewayError) return lookup
    return this.#admit(slots, lookup, principal, slug, target)
  }

  /** One store lookup (rejects when the store is unreachable), with the credentials decrypted. */
  async #fill(organisationId: string, slug: string): Promise<Lookup> {
    const record = await this.#store.findVirtualKey(organisationId, slug)
    if (record === null) return { record: null, credentials: [], subject: null, expiresAtMs: 0, cursor: 0 }
    let credentials: ProviderCredential[]
    try {
      credentials = this.#credentialsOf(record)
    } catch (error) {
      // The boot check makes this rare: a damaged row, or a row sealed under another key since.
      this.#logger.error({ err: error, virtualKeyId: record.id }, 'a virtual key credential cannot be decrypted with the master key')
      return gatewayError(ERRORS.GW_INTERNAL)
    }
    return {
      record,
      credentials,
      subject: {
        kind: 'virtual-key',
        id: record.id,
        label: `virtual key ${record.slug}`,
        rateLimits: record.rateLimits,
        usageLimits: record.usageLimits === null ? [] : [record.usageLimits],
      },
      expiresAtMs: record.expiresAt === null ? Number.POSITIVE_INFINITY : Date.parse(record.expiresAt),
      cursor: 0,
    }
  }

  #credentialsOf(record: VirtualKeyRecord): ProviderCredential[] {
    const modelConfig = record.sealedModelConfig === null ? null : (JSON.parse(this.#cipher.open(record.sealedModelConfig)) as Record<string, unknown>)
    const keys: Array<string | null> = record.sealedKeys.length === 0 ? [null] : record.sealedKeys.map((sealed) => this.#cipher.open(sealed))
    return keys.map((apiKey) => ({ virtualKeySlug: record.slug, provider: record.provider, apiKey, customHost: record.customHost, modelConfig }))
  }

  #admit(slots: CredentialSlots, entry: Entry, principal: Principal, slug: string, target: RoutingTarget | null): GatewayError | undefined {
    const record = entry.record
    // Another workspace's key is reported exactly like an unknown one.
    if (record === null || principal.workspaceId === null || record.workspaceId !== principal.workspaceId) return notFound(slug, target)
    if (entry.expiresAtMs <= this.#clock.now() || record.status === 'expired') {
      return gatewayError(ERRORS.GW_VIRTUAL_KEY_EXPIRED, `The virtual key ${record.slug} has expired`)
    }
    const credentials = entry.credentials
    const index = entry.cursor
    entry.cursor = index + 1 >= credentials.length ? 0 : index + 1
    slots.credential = credentials[index] as ProviderCredential
    slots.virtualKey = entry.subject
    return undefined
  }

  /** Any stored sealed secret must open under the master key in use (never find out per request). */
  async #checkMasterKey(): Promise<void> {
    const sample = await this.#store.sampleSealedSecret()
    if (sample === null) return
    try {
      this.#cipher.open(sample)
    } catch (error) {
      throw new Error(
        `GATEWAY_MASTER_KEY does not match the key that sealed the stored credentials (${(error as Error).message}). ` +
          'Start with the master key that sealed them: the same GATEWAY_MASTER_KEY, or the master.key file of the data directory.',
      )
    }
  }
}

/** 404 naming where the slug came from: the header, or the config target (`config.targets[1].virtual_key`). */
function notFound(slug: string, target: RoutingTarget | null): GatewayError {
  const param = target === null ? HEADER_PARAM : `${target.path}.virtual_key`
  return gatewayError(ERRORS.GW_VIRTUAL_KEY_NOT_FOUND, `Virtual key "${slug.slice(0, MAX_SLUG_LENGTH)}" not found`, { param })
}
