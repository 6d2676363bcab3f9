/**
 * virtual-key: resolves `x-gateway-virtual-key: <slug>` to the provider credential stored under it.
 * Phases: onRequest (priority 800: after auth and scope-check, before rate-limit and budget);
 * start (subscriptions, master key check).
 * Reads `ctx.principal`, `ctx.headers`; writes `ctx.credential` (provider, decrypted key, custom
 * host, model config: forward uses it instead of the provider headers) and `ctx.virtualKey` (the
 * key's rate and usage limits).
 * I/O: admin store lookups by slug (or UUID) within the caller's organisation, through an
 * in-process cache filled on first use (bounded; unknown slugs remembered briefly) and evicted by
 * `virtual-keys` and `workspaces` change notifications (`*` clears it). Provider keys are decrypted
 * once per cache fill; several keys are used in turn (round robin).
 * A request that also sends `x-gateway-custom-host` is refused (400 GW_REQ_INVALID, before any
 * lookup): the stored provider key goes only to its provider's endpoint or the key's own
 * `custom_host`, and silently ignoring the header would hide that from the client.
 * Failure policy: fails closed. Unknown slug, or a key of another workspace → 404
 * GW_VIRTUAL_KEY_NOT_FOUND (never revealed); expired → 401 GW_VIRTUAL_KEY_EXPIRED; store
 * unreachable and nothing cached → 503 GW_VIRTUAL_KEY_UNAVAILABLE (a stale cached key is used while
 * it is unreachable); a credential the master key cannot open → 500 (logged, not cached).
 * Start: when the store holds a sealed secret the master key cannot open, boot fails: running on
 * would answer every virtual key with an error, and new keys would be sealed under a second key.
 */
import type { LimitSubject, Principal, ProviderCredential, RequestContext } from '../../core/context.js'
import { ERRORS, gatewayError, type GatewayError } from '../../core/errors.js'
import type { GatewayPlugin } from '../../core/plugin.js'
import { CHANGE_CHANNELS, type AdminStore, type ChangeNotifier, type Clock, type Logger, type SecretCipher, type VirtualKeyRecord } from '../../core/ports.js'
import type { VirtualKeyConfig } from './config.js'

/** The client may not point a stored credential at a host of its choosing (API.md §2). */
const CUSTOM_HOST_WITH_VIRTUAL_KEY = gatewayError(
  ERRORS.GW_REQ_INVALID,
  "x-gateway-custom-host cannot be combined with x-gateway-virtual-key: the virtual key's provider key goes only to its provider or to the key's own custom_host. Drop the header, or set the virtual key's custom_host through the Admin API (PUT /v1/virtual-keys/{id} with custom_host and key)",
  { param: 'x-gateway-custom-host' },
)

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
  readonly freshUntil: number
  /** Index of the credential the next request uses. */
  cursor: number
}

export class VirtualKeyPlugin implements GatewayPlugin {
  readonly #config: VirtualKeyConfig
  readonly #store: AdminStore
  readonly #cipher: SecretCipher
  readonly #notifier: ChangeNotifier
  readonly #clock: Clock
  readonly #logger: Logger
  readonly #cache = new Map<string, Entry>()
  /** Lookups in flight, shared by concurrent requests for the same slug. */
  readonly #pending = new Map<string, Promise<Entry | GatewayError>>()
  /** Bumped by every eviction: a lookup that started before one must not cache what it read. */
  #generation = 0
  #unsubscribe: Array<() => void> = []

  constructor(config: VirtualKeyConfig, store: AdminStore, cipher: SecretCipher, notifier: ChangeNotifier, clock: Clock, logger: Logger) {
    this.#config = config
    this.#store = store
    this.#cipher = cipher
    this.#notifier = notifier
    this.#clock = clock
    this.#logger = logger
  }

  async start(): Promise<void> {
    this.#unsubscribe = [
      this.#notifier.subscribe(CHANGE_CHANNELS.virtualKeys, (message) => this.#evict((entry) => message === '*' || entry.record === null || entry.record.id === message)),
      this.#notifier.subscribe(CHANGE_CHANNELS.workspaces, (message) => this.#evict((entry) => message === '*' || entry.record?.workspaceId === message)),
    ]
    await this.#checkMasterKey()
  }

  async close(): Promise<void> {
    for (const unsubscribe of this.#unsubscribe) unsubscribe()
    this.#unsubscribe = []
    this.#cache.clear()
  }

  onRequest(ctx: RequestContext): GatewayError | undefined | Promise<GatewayError | undefined> {
    const slug = ctx.headers['x-gateway-virtual-key']
    if (slug === undefined) return undefined
    if (ctx.headers['x-gateway-custom-host'] !== undefined) return CUSTOM_HOST_WITH_VIRTUAL_KEY
    const principal = ctx.principal
    if (principal === null || slug.length === 0 || slug.length > MAX_SLUG_LENGTH) return notFound(slug)
    const cacheKey = `${principal.organisationId}\n${slug}`
    const cached = this.#cache.get(cacheKey)
    if (cached !== undefined && cached.freshUntil > this.#clock.now()) return this.#admit(ctx, cached, principal, slug)
    return this.#lookup(ctx, principal, slug, cacheKey, cached)
  }

  async #lookup(ctx: RequestContext, principal: Principal, slug: string, cacheKey: string, stale: Entry | undefined): Promise<GatewayError | undefined> {
    let pending = this.#pending.get(cacheKey)
    if (pending === undefined) {
      const filling = this.#fill(principal.organisationId, slug, cacheKey, stale)
      this.#pending.set(cacheKey, filling)
      // An eviction may have detached it, and a newer lookup of the same key taken its place.
      void filling.finally(() => {
        if (this.#pending.get(cacheKey) === filling) this.#pending.delete(cacheKey)
      })
      pending = filling
    }
    const entry = await pending
    if (entry instanceof Error) return entry
    return this.#admit(ctx, entry, principal, slug)
  }

  async #fill(organisationId: string, slug: string, cacheKey: string, stale: Entry | undefined): Promise<Entry | GatewayError> {
    const generation = this.#generation
    let record: VirtualKeyRecord | null
    try {
      record = await this.#store.findVirtualKey(organisationId, slug)
    } catch (error) {
      if (stale !== undefined) {
        this.#logger.warn({ err: error }, 'admin store unreachable: using a stale cached virtual key')
        return stale
      }
      this.#logger.error({ err: error }, 'admin store unreachable: refusing the virtual key')
      return gatewayError(ERRORS.GW_VIRTUAL_KEY_UNAVAILABLE)
    }
    const now = this.#clock.now()
    let entry: Entry
    if (record === null) {
      entry = { record: null, credentials: [], subject: null, expiresAtMs: 0, freshUntil: now + this.#config.negativeCacheTtlMs, cursor: 0 }
    } else {
      let credentials: ProviderCredential[]
      try {
        credentials = this.#credentialsOf(record)
      } catch (error) {
        // The boot check makes this rare: a damaged row, or a row sealed under another key since.
        this.#logger.error({ err: error, virtualKeyId: record.id }, 'a virtual key credential cannot be decrypted with the master key')
        return gatewayError(ERRORS.GW_INTERNAL)
      }
      entry = {
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
        freshUntil: now + this.#config.cacheTtlMs,
        cursor: 0,
      }
    }
    if (generation === this.#generation) this.#remember(cacheKey, entry)
    return entry
  }

  #credentialsOf(record: VirtualKeyRecord): ProviderCredential[] {
    const modelConfig = record.sealedModelConfig === null ? null : (JSON.parse(this.#cipher.open(record.sealedModelConfig)) as Record<string, unknown>)
    const keys: Array<string | null> = record.sealedKeys.length === 0 ? [null] : record.sealedKeys.map((sealed) => this.#cipher.open(sealed))
    return keys.map((apiKey) => ({ virtualKeySlug: record.slug, provider: record.provider, apiKey, customHost: record.customHost, modelConfig }))
  }

  #admit(ctx: RequestContext, entry: Entry, principal: Principal, slug: string): GatewayError | undefined {
    const record = entry.record
    // Another workspace's key is reported exactly like an unknown one.
    if (record === null || principal.workspaceId === null || record.workspaceId !== principal.workspaceId) return notFound(slug)
    if (entry.expiresAtMs <= this.#clock.now() || record.status === 'expired') {
      return gatewayError(ERRORS.GW_VIRTUAL_KEY_EXPIRED, `The virtual key ${record.slug} has expired`)
    }
    const credentials = entry.credentials
    const index = entry.cursor
    entry.cursor = index + 1 >= credentials.length ? 0 : index + 1
    ctx.credential = credentials[index] as ProviderCredential
    ctx.virtualKey = entry.subject
    return undefined
  }

  /**
   * Drops matching entries. Lookups still running are detached too: their answer may predate the
   * change, so it is neither cached (the generation moved on) nor shared with requests that
   * arrive after the notice, which start a lookup of their own.
   */
  #evict(matches: (entry: Entry) => boolean): void {
    this.#generation++
    this.#pending.clear()
    for (const [key, entry] of this.#cache) if (matches(entry)) this.#cache.delete(key)
  }

  #remember(cacheKey: string, entry: Entry): void {
    if (!this.#cache.has(cacheKey) && this.#cache.size >= this.#config.maxCacheEntries) {
      // Maps iterate in insertion order: drop the oldest entry.
      const oldest = this.#cache.keys().next()
      if (!oldest.done) this.#cache.delete(oldest.value)
    }
    this.#cache.set(cacheKey, entry)
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

function notFound(slug: string): GatewayError {
  return gatewayError(ERRORS.GW_VIRTUAL_KEY_NOT_FOUND, `Virtual key "${slug.slice(0, MAX_SLUG_LENGTH)}" not found`, { param: 'x-gateway-virtual-key' })
}
