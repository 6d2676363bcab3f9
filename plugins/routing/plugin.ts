/**
 * routing: resolves the config a request is routed by (API.md §4) into `ctx.routing`; forward's
 * router then tries its targets (plugins/forward/router.ts).
 * Phases: onRequest (priority 820: after auth, scope-check and prompt-render, before virtual-key, so
 * a config next to `x-gateway-virtual-key` is refused before the key is looked up, and before
 * rate-limit, so a bad config is refused before anything is counted); start (subscriptions).
 * Reads `ctx.principal` (workspace, `defaultConfig`), `ctx.prompt`, headers `x-gateway-config`,
 * `x-gateway-virtual-key`, `x-gateway-provider`, `x-gateway-custom-host`; writes `ctx.routing`.
 * Where the config comes from:
 * - `x-gateway-config` holding a JSON object (first character `{`): an inline config, checked with
 *   the one schema (core/routing-config.ts; 400 `GW_CONFIG_INVALID` naming each offending path) and
 *   compiled. Compiled inline configs are kept by their text (`maxInlineEntries`, oldest dropped).
 * - `x-gateway-config` holding anything else: a saved config's slug or id, looked up in the caller's
 *   organisation through an in-process cache (core/read-through-cache.ts: `maxCacheEntries`,
 *   `cacheTtlMs`, unknown slugs for `negativeCacheTtlMs`, one lookup per slug in flight), compiled
 *   once per version, dropped by `configs` change notifications (a config id; `*` clears) and
 *   `workspaces` ones. Another workspace's config, or an archived one, is reported as unknown (404).
 * - No header: the API key's (else its workspace's) default config, unless the request names its
 *   own provider (`x-gateway-provider` or `x-gateway-virtual-key`): a default never overrides an
 *   explicit choice. A default config that no longer exists is a 404 naming it.
 * Refused (400 `GW_CONFIG_INVALID`): `x-gateway-config` next to `x-gateway-virtual-key` (put the key
 * in a target: which of the two should win is not guessable); a config whose targets name their own
 * provider next to `x-gateway-provider` or `x-gateway-custom-host` (same reason; a config without
 * targets applies its settings to the request's own provider selection instead); a config on a prompt
 * route (the template's virtual key decides; a default config does not apply there).
 * I/O: admin store reads on a cache miss only.
 * Failure policy: fails closed. Store unreachable and nothing cached → 503 `GW_CONFIG_UNAVAILABLE`
 * (a stale cached config is used while it is unreachable); a saved config that no longer passes the
 * schema (written by an older version) → 400 naming the path, logged at warn.
 */
import type { ConfigRecord } from '../../core/admin-records.js'
import { CHANGE_CHANNELS } from '../../core/channels.js'
import type { Principal, RequestContext } from '../../core/context.js'
import { ERRORS, gatewayError, GatewayError } from '../../core/errors.js'
import type { GatewayPlugin } from '../../core/plugin.js'
import type { AdminStore, ChangeNotifier } from '../../core/ports.js'
import { ReadThroughCache } from '../../core/read-through-cache.js'
import { checkRoutingConfig, compileRoutingConfig, parseInlineConfig, type ConfigIssue, type RoutingPlan } from '../../core/routing-config.js'
import type { Clock, Logger } from '../../core/service.js'
import type { RoutingPluginConfig } from './config.js'

const HEADER = 'x-gateway-config'
const MAX_SLUG_LENGTH = 200

const WITH_VIRTUAL_KEY = gatewayError(
  ERRORS.GW_CONFIG_INVALID,
  'x-gateway-config cannot be combined with x-gateway-virtual-key: name the virtual key in a config target (virtual_key) instead',
  { param: 'x-gateway-virtual-key' },
)
const WITH_PROVIDER = gatewayError(
  ERRORS.GW_CONFIG_INVALID,
  'This config routes to its own targets: drop x-gateway-provider and x-gateway-custom-host, or use a config without targets to apply settings to them',
  { param: 'x-gateway-provider' },
)
const ON_PROMPT = gatewayError(ERRORS.GW_CONFIG_INVALID, "A prompt runs through its template's virtual key: drop x-gateway-config", { param: HEADER })

/** One cached lookup: the record and its compiled plan, or `null` for an unknown slug. */
interface Entry {
  readonly record: ConfigRecord | null
  readonly plan: RoutingPlan | GatewayError | null
}

export class RoutingPlugin implements GatewayPlugin {
  readonly #store: AdminStore
  readonly #notifier: ChangeNotifier
  readonly #clock: Clock
  readonly #logger: Logger
  readonly #maxInline: number
  /** By `<organisation id>\n<slug or id>`. */
  readonly #saved: ReadThroughCache<string, Entry>
  /** Compiled inline configs (or their refusal) by header text; insertion order is age. */
  readonly #inline = new Map<string, RoutingPlan | GatewayError>()
  #unsubscribe: Array<() => void> = []

  constructor(config: RoutingPluginConfig, store: AdminStore, notifier: ChangeNotifier, clock: Clock, logger: Logger) {
    this.#store = store
    this.#notifier = notifier
    this.#clock = clock
    this.#logger = logger
    this.#maxInline = config.maxInlineEntries
    this.#saved = new ReadThroughCache<string, Entry>({
      maxEntries: config.maxCacheEntries,
      freshUntil: (entry, now) => now + (entry.record === null ? config.negativeCacheTtlMs : config.cacheTtlMs),
      staleOnError: (error) => logger.warn({ err: error }, 'admin store unreachable: using a stale cached config'),
      clock,
    })
  }

  async start(): Promise<void> {
    // Unknown slugs go on any config change: the change may have created one.
    this.#unsubscribe = [
      this.#notifier.subscribe(CHANGE_CHANNELS.configs, (message) =>
        message === '*' ? this.#saved.clear() : this.#saved.evictWhere((entry) => entry.record === null || entry.record.id === message),
      ),
      this.#notifier.subscribe(CHANGE_CHANNELS.workspaces, (message) =>
        message === '*' ? this.#saved.clear() : this.#saved.evictWhere((entry) => entry.record === null || entry.record.workspaceId === message),
      ),
    ]
  }

  async close(): Promise<void> {
    for (const unsubscribe of this.#unsubscribe) unsubscribe()
    this.#unsubscribe = []
    this.#saved.clear()
    this.#inline.clear()
  }

  onRequest(ctx: RequestContext): GatewayError | undefined | Promise<GatewayError | undefined> {
    const headers = ctx.headers
    const principal = ctx.principal
    let source = headers[HEADER]
    if (source === undefined) {
      // A default never overrides an explicit choice, and does not apply to prompts.
      const fallback = principal?.defaultConfig
      if (fallback === undefined || fallback === null || ctx.prompt !== null) return undefined
      if (headers['x-gateway-provider'] !== undefined || headers['x-gateway-virtual-key'] !== undefined) return undefined
      source = fallback
    } else {
      if (ctx.prompt !== null) return ON_PROMPT
      if (headers['x-gateway-virtual-key'] !== undefined) return WITH_VIRTUAL_KEY
    }
    const trimmed = source.trimStart()
    if (trimmed.startsWith('{')) return this.#admit(ctx, this.#inlinePlan(trimmed))
    // Saved configs belong to a workspace: without auth there is none to look in.
    if (principal === null) return notFound(source)
    return this.#savedPlan(ctx, principal, source.trim())
  }

  #inlinePlan(text: string): RoutingPlan | GatewayError {
    const cached = this.#inline.get(text)
    if (cached !== undefined) return cached
    const check = parseInlineConfig(text)
    const plan = check.ok ? compileRoutingConfig(check.config, null) : invalid(check.issues, 'x-gateway-config')
    if (this.#maxInline > 0) {
      if (this.#inline.size >= this.#maxInline) this.#inline.delete(this.#inline.keys().next().value as string)
      this.#inline.set(text, plan)
    }
    return plan
  }

  #savedPlan(ctx: RequestContext, principal: Principal, slug: string): GatewayError | undefined | Promise<GatewayError | undefined> {
    if (slug.length === 0 || slug.length > MAX_SLUG_LENGTH) return notFound(slug)
    const key = `${principal.organisationId}\n${slug}`
    const cached = this.#saved.get(key, this.#clock.now())
    if (cached !== undefined) return this.#admitSaved(ctx, principal, cached, slug)
    return this.#lookup(ctx, principal, slug, key)
  }

  async #lookup(ctx: RequestContext, principal: Principal, slug: string, key: string): Promise<GatewayError | undefined> {
    let entry: Entry
    try {
      entry = await this.#saved.load(key, () => this.#fill(principal.organisationId, slug))
    } catch (error) {
      this.#logger.error({ err: error }, 'admin store unreachable: refusing the config')
      return gatewayError(ERRORS.GW_CONFIG_UNAVAILABLE)
    }
    return this.#admitSaved(ctx, principal, entry, slug)
  }

  async #fill(organisationId: string, slug: string): Promise<Entry> {
    const record = await this.#store.findConfig(organisationId, slug)
    if (record === null) return { record: null, plan: null }
    let parsed: unknown
    try {
      parsed = JSON.parse(record.config)
    } catch {
      parsed = null
    }
    const check = checkRoutingConfig(parsed, 'saved')
    if (!check.ok) {
      this.#logger.warn({ configId: record.id, issues: check.issues }, 'a saved config no longer passes the config schema')
      return { record, plan: invalid(check.issues, 'x-gateway-config', `saved config ${record.slug}`) }
    }
    return { record, plan: compileRoutingConfig(check.config, { slug: record.slug, version: record.version }) }
  }

  #admitSaved(ctx: RequestContext, principal: Principal, entry: Entry, slug: string): GatewayError | undefined {
    const record = entry.record
    // Another workspace's config, or an archived one, is reported exactly like an unknown one.
    if (record === null || entry.plan === null || record.workspaceId !== principal.workspaceId || record.status !== 'active') return notFound(slug)
    return this.#admit(ctx, entry.plan)
  }

  #admit(ctx: RequestContext, plan: RoutingPlan | GatewayError): GatewayError | undefined {
    if (plan instanceof GatewayError) return plan
    if (plan.root.kind === 'strategy' || plan.root.target.provider !== null || plan.root.target.virtualKey !== null) {
      const headers = ctx.headers
      if (headers['x-gateway-provider'] !== undefined || headers['x-gateway-custom-host'] !== undefined) return WITH_PROVIDER
    }
    ctx.routing = plan
    return undefined
  }
}

function notFound(slug: string): GatewayError {
  return gatewayError(ERRORS.GW_CONFIG_NOT_FOUND, `Config "${slug.slice(0, MAX_SLUG_LENGTH)}" not found`, { param: HEADER })
}

/** 400 naming every offending path (`targets[1].retry.attempts: …`). */
function invalid(issues: readonly ConfigIssue[], param: string, what = 'x-gateway-config'): GatewayError {
  const listed = issues.map((issue) => (issue.path.length === 0 ? issue.message : `${issue.path}: ${issue.message}`)).join('; ')
  return gatewayError(ERRORS.GW_CONFIG_INVALID, `Invalid config in ${what}: ${listed}`, { param: issues[0]?.path.length ? issues[0].path : param })
}
