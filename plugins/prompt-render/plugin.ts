/**
 * prompt-render: runs saved prompt templates (API.md §3) on `POST /v1/prompts/{id}/completions`
 * (`completions.write`) and `POST /v1/prompts/{id}/render` (`prompts.render`).
 * Phases: onRequest and onAccess, priority 850 (after auth and scope-check, before virtual-key);
 * start/close (change subscriptions). On every other route both hooks return at once: onRequest
 * compares the route with the two prompt routes, onAccess reads `ctx.prompt` (null).
 *
 * Order (why 850, not after budget as DESIGN §3 lists it): the prompt decides the virtual key (and so
 * the provider, its credential and its `custom_host`) and the real request body (`max_tokens`, its
 * size), which virtual-key (onRequest 800), rate-limit (onAccess 700) and budget (onAccess 600)
 * need. So:
 * - onRequest resolves `{id}[@suffix]` to a compiled version (cached; a store round trip only on a
 *   miss) and writes `ctx.prompt`: slug and version (for the request log), the template's virtual
 *   key (virtual-key resolves it in place of `x-gateway-virtual-key`) and the route the rendered
 *   request goes out as (`chat.completions` or `completions`: forward's upstream path and usage);
 * - onAccess, which runs before rate-limit's and budget's (same phase, higher priority), renders
 *   and replaces `ctx.body` and `ctx.rawBody` with the complete request, so the limits, forward and
 *   the log all see what goes upstream. On `/render` it answers `{"success":true,"data":<request>}`
 *   itself: a ready reply stops the pipeline, so no provider is called and no limit is charged.
 *
 * Reads `ctx.route`, `ctx.params.promptId`, `ctx.headers`, `ctx.principal`, `ctx.body`; writes
 * `ctx.prompt`, `ctx.body`, `ctx.rawBody`.
 * Version suffix: none = the published version, `@latest` the newest, `@<n>` version n,
 * `@<label>` the version carrying that label (the workspace's own label, else a built-in one).
 * Refused: `x-gateway-provider`, `x-gateway-virtual-key`, `x-gateway-custom-host` or
 * `x-gateway-config` next to a prompt (400 naming the header: the template's virtual key decides
 * where the request goes); a completion whose version has no virtual key (400 naming the fix).
 * Rendering: render.ts (Mustache inside message contents only, no HTML escaping, every used
 * variable required, partials from the prompt's workspace, `maxRenderedChars`).
 * I/O: admin store lookups (prompt by slug or id, label by name, version, partials by name and
 * version) within the caller's organisation, through an in-process cache of compiled versions
 * keyed by organisation and `{id}[@suffix]` (core/read-through-cache.ts: fresh for `cacheTtlMs`,
 * unknown prompts, versions and labels for `negativeCacheTtlMs`, one compile per key in flight),
 * dropped by `prompts` change notifications (a workspace UUID drops that workspace's entries and
 * every "unknown" one; `*` drops all), so an edit, publish, label move or partial change made on
 * any instance is seen by every instance at once (Redis pub/sub with `REDIS_URL`).
 * Failure policy: fails closed. Unknown prompt, version or label, or one of another workspace → 404
 * GW_PROMPT_NOT_FOUND (another workspace's prompt is never revealed); store unreachable and nothing
 * cached → 503 GW_PROMPT_UNAVAILABLE (a stale compiled version is used while it is unreachable).
 */
import type { VersionSelector } from '../../core/admin-records.js'
import { CHANGE_CHANNELS } from '../../core/channels.js'
import type { Principal, PromptRun, RequestContext } from '../../core/context.js'
import { ERRORS, gatewayError, GatewayError } from '../../core/errors.js'
import { jsonReply, type GatewayPlugin, type Reply } from '../../core/plugin.js'
import type { AdminStore, ChangeNotifier } from '../../core/ports.js'
import { ReadThroughCache } from '../../core/read-through-cache.js'
import { INFERENCE_ROUTES, PROMPT_ROUTES, type RouteSpec } from '../../core/routes.js'
import type { Clock, Logger } from '../../core/service.js'
import type { PromptRenderConfig } from './config.js'
import { partialNamesIn, PromptTemplate, templateTexts } from './render.js'

/** Prompt ids (with their suffix) are short; anything longer is unknown without asking the store. */
const MAX_ID_LENGTH = 300
/** Partials one template may use, nested ones included. */
const MAX_PARTIALS = 100
const NUMBER_SUFFIX = /^[0-9]{1,9}$/

/** Headers that choose where a request goes; with a prompt, its virtual key decides. */
const CONFLICTING_HEADERS = ['x-gateway-provider', 'x-gateway-virtual-key', 'x-gateway-custom-host', 'x-gateway-config'] as const
const CONFLICTS: Readonly<Record<string, GatewayError>> = Object.fromEntries(
  CONFLICTING_HEADERS.map((name) => [
    name,
    gatewayError(
      ERRORS.GW_REQ_INVALID,
      `${name} cannot be combined with a prompt: the prompt template's virtual key decides the provider and host. Drop the header, or change the prompt's virtual_key through the Admin API`,
      { param: name },
    ),
  ]),
)

const CHAT_ROUTE = routeById('chat.completions')
const COMPLETIONS_ROUTE = routeById('completions')

function routeById(id: string): RouteSpec {
  const route = INFERENCE_ROUTES.find((candidate) => candidate.id === id)
  if (route === undefined) throw new Error(`prompt-render: no inference route "${id}"`)
  return route
}

/** A compiled version as the requests that run it see it (`ctx.prompt`); one per route, made once. */
class PreparedRun implements PromptRun {
  readonly slug: string
  readonly version: number
  readonly virtualKey: string | null
  readonly route: RouteSpec
  readonly template: PromptTemplate
  /** Answer the rendered body instead of forwarding it (`/render`). */
  readonly render: boolean

  constructor(slug: string, version: number, virtualKey: string | null, route: RouteSpec, template: PromptTemplate, render: boolean) {
    this.slug = slug
    this.version = version
    this.virtualKey = virtualKey
    this.route = route
    this.template = template
    this.render = render
  }
}

/** One cached resolution of `{id}[@suffix]` in an organisation. */
type Lookup =
  | { readonly workspaceId: string; readonly completions: PreparedRun; readonly rendering: PreparedRun; readonly error: null }
  /** `workspaceId` is null when no prompt has that id (then every change drops the entry). */
  | { readonly workspaceId: string | null; readonly error: GatewayError }

export class PromptRenderPlugin implements GatewayPlugin {
  readonly #store: AdminStore
  readonly #notifier: ChangeNotifier
  readonly #clock: Clock
  readonly #logger: Logger
  readonly #maxRenderedChars: number
  /** By `<organisation id>\n<promptId as in the path>`. */
  readonly #cache: ReadThroughCache<string, Lookup>
  #unsubscribe: (() => void) | null = null

  constructor(config: PromptRenderConfig, store: AdminStore, notifier: ChangeNotifier, clock: Clock, logger: Logger) {
    this.#store = store
    this.#notifier = notifier
    this.#clock = clock
    this.#logger = logger
    this.#maxRenderedChars = config.maxRenderedChars
    this.#cache = new ReadThroughCache<string, Lookup>({
      maxEntries: config.maxCacheEntries,
      // A 404 (unknown prompt, version or label) may stop being one when a version or label is
      // made: kept briefly. A template that does not compile stays so until it is edited.
      freshUntil: (lookup, now) => now + (lookup.error !== null && lookup.error.status === 404 ? config.negativeCacheTtlMs : config.cacheTtlMs),
      staleOnError: (error) => logger.warn({ err: error }, 'admin store unreachable: using a stale compiled prompt version'),
      clock,
    })
  }

  async start(): Promise<void> {
    this.#unsubscribe = this.#notifier.subscribe(CHANGE_CHANNELS.prompts, (message) =>
      message === '*' ? this.#cache.clear() : this.#cache.evictWhere((lookup) => lookup.workspaceId === message || lookup.workspaceId === null),
    )
  }

  async close(): Promise<void> {
    this.#unsubscribe?.()
    this.#unsubscribe = null
    this.#cache.clear()
  }

  onRequest(ctx: RequestContext): GatewayError | undefined | Promise<GatewayError | undefined> {
    const route = ctx.route
    if (route !== PROMPT_ROUTES.completions && route !== PROMPT_ROUTES.render) return undefined
    const headers = ctx.headers
    for (const name of CONFLICTING_HEADERS) if (headers[name] !== undefined) return CONFLICTS[name]
    const principal = ctx.principal
    const promptId = ctx.params.promptId ?? ''
    if (principal === null || principal.workspaceId === null || promptId.length === 0 || promptId.length > MAX_ID_LENGTH) return notFound(promptId)
    const cacheKey = `${principal.organisationId}\n${promptId}`
    const cached = this.#cache.get(cacheKey, this.#clock.now())
    if (cached !== undefined) return this.#admit(ctx, cached, principal, promptId)
    return this.#lookup(ctx, principal, promptId, cacheKey)
  }

  onAccess(ctx: RequestContext): GatewayError | Reply | undefined {
    const run = ctx.prompt
    if (!(run instanceof PreparedRun)) return undefined
    const request = run.template.buildRequest(ctx.body ?? {}, this.#maxRenderedChars)
    if (request instanceof GatewayError) return request
    if (run.render) return jsonReply(200, { success: true, data: request })
    ctx.body = request
    ctx.rawBody = Buffer.from(JSON.stringify(request))
    return undefined
  }

  /** A miss: compile (shared; a stale entry while the store is unreachable), else 503. */
  async #lookup(ctx: RequestContext, principal: Principal, promptId: string, cacheKey: string): Promise<GatewayError | undefined> {
    let lookup: Lookup
    try {
      lookup = await this.#cache.load(cacheKey, () => this.#fill(principal.organisationId, promptId))
    } catch (error) {
      this.#logger.error({ err: error }, 'admin store unreachable: refusing the prompt')
      return gatewayError(ERRORS.GW_PROMPT_UNAVAILABLE)
    }
    return this.#admit(ctx, lookup, principal, promptId)
  }

  #admit(ctx: RequestContext, lookup: Lookup, principal: Principal, promptId: string): GatewayError | undefined {
    // Another workspace's prompt answers exactly like an unknown one, whatever is wrong with it.
    if (lookup.workspaceId !== principal.workspaceId) return notFound(promptId)
    if (lookup.error !== null) return lookup.error
    if (ctx.route === PROMPT_ROUTES.render) {
      ctx.prompt = lookup.rendering
      return undefined
    }
    const run = lookup.completions
    if (run.virtualKey === null) {
      return gatewayError(
        ERRORS.GW_REQ_INVALID,
        `Prompt ${run.slug} version ${run.version} has no virtual key, so it cannot be run: set one with PUT /v1/prompts/${run.slug} (virtual_key), or use /render and call the provider yourself`,
        { param: 'virtual_key' },
      )
    }
    ctx.prompt = run
    return undefined
  }

  /** Resolves and compiles `{id}[@suffix]` (rejects when the store is unreachable). */
  async #fill(organisationId: string, promptId: string): Promise<Lookup> {
    const at = promptId.indexOf('@')
    const id = at < 0 ? promptId : promptId.slice(0, at)
    const suffix = at < 0 ? null : promptId.slice(at + 1)
    if (id.length === 0) return { workspaceId: null, error: notFound(promptId) }
    const prompt = await this.#store.findPrompt(organisationId, id)
    if (prompt === null) return { workspaceId: null, error: notFound(promptId) }
    const workspaceId = prompt.workspaceId
    let selector: VersionSelector
    if (suffix === null) selector = { kind: 'published' }
    else if (suffix === 'latest') selector = { kind: 'latest' }
    else if (NUMBER_SUFFIX.test(suffix)) selector = { kind: 'number', version: Number(suffix) }
    else {
      const label = suffix.length === 0 ? null : await this.#store.findLabelByName(organisationId, workspaceId, suffix)
      if (label === null) return { workspaceId, error: versionNotFound(prompt.slug, `labelled "${clip(suffix)}"`) }
      selector = { kind: 'label', labelId: label.id }
    }
    const version = await this.#store.findPromptVersion(prompt.id, selector)
    if (version === null) {
      const which = selector.kind === 'number' ? `${selector.version}` : selector.kind === 'label' ? `labelled "${clip(suffix ?? '')}"` : selector.kind
      return { workspaceId, error: versionNotFound(prompt.slug, which) }
    }
    const where = `Prompt ${prompt.slug} version ${version.version}`
    const partials = await this.#partialsOf(workspaceId, version, where)
    if (partials instanceof GatewayError) return { workspaceId, error: partials }
    const template = PromptTemplate.compile(version, partials, where, this.#maxRenderedChars)
    if (template instanceof GatewayError) return { workspaceId, error: template }
    const route = template.kind === 'chat' ? CHAT_ROUTE : COMPLETIONS_ROUTE
    return {
      workspaceId,
      completions: new PreparedRun(prompt.slug, version.version, version.virtualKey, route, template, false),
      rendering: new PreparedRun(prompt.slug, version.version, null, PROMPT_ROUTES.render, template, true),
      error: null,
    }
  }

  /**
   * The text of every partial the template uses, nested ones included, by the name it is used
   * with (`name`, `name@latest`, `name@<n>`); a name with no such partial is left out (the compile
   * then reports it).
   */
  async #partialsOf(workspaceId: string, source: Parameters<typeof templateTexts>[0], where: string): Promise<Map<string, string> | GatewayError> {
    const texts = templateTexts(source)
    if (texts instanceof GatewayError) return gatewayError(ERRORS.GW_PROMPT_TEMPLATE_INVALID, `${where}: ${texts.message}`)
    const queue: string[] = []
    for (const text of texts) {
      const names = partialNamesIn(text, where)
      if (names instanceof GatewayError) return names
      queue.push(...names)
    }
    const partials = new Map<string, string>()
    const looked = new Set<string>()
    while (queue.length > 0) {
      const name = queue.shift() as string
      if (looked.has(name)) continue
      looked.add(name)
      if (looked.size > MAX_PARTIALS) return gatewayError(ERRORS.GW_PROMPT_TEMPLATE_INVALID, `${where} uses more than ${MAX_PARTIALS} partials`)
      const text = await this.#partialText(workspaceId, name)
      if (text === null) continue
      partials.set(name, text)
      const names = partialNamesIn(text, `${where}, partial "${clip(name)}"`)
      if (names instanceof GatewayError) return names
      queue.push(...names)
    }
    return partials
  }

  /** `name` (published), `name@latest` or `name@<n>`; labels do not apply to partials. */
  async #partialText(workspaceId: string, used: string): Promise<string | null> {
    const at = used.indexOf('@')
    const name = at < 0 ? used : used.slice(0, at)
    const suffix = at < 0 ? null : used.slice(at + 1)
    let selector: VersionSelector
    if (suffix === null) selector = { kind: 'published' }
    else if (suffix === 'latest') selector = { kind: 'latest' }
    else if (NUMBER_SUFFIX.test(suffix)) selector = { kind: 'number', version: Number(suffix) }
    else return null
    const partial = await this.#store.findPartialByName(workspaceId, name)
    if (partial === null) return null
    const version = await this.#store.findPartialVersion(partial.id, selector)
    return version === null ? null : version.template
  }
}

function clip(text: string): string {
  return text.length <= 100 ? text : `${text.slice(0, 100)}…`
}

function notFound(promptId: string): GatewayError {
  return gatewayError(ERRORS.GW_PROMPT_NOT_FOUND, `Invalid prompt id: no prompt "${clip(promptId)}" in this workspace`, { param: 'promptId' })
}

function versionNotFound(slug: string, which: string): GatewayError {
  return gatewayError(ERRORS.GW_PROMPT_NOT_FOUND, `Prompt ${slug} has no version ${which}`, { param: 'promptId' })
}
