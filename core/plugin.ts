/**
 * The plugin contract.
 *
 * A plugin is a plain class built by its definition's `create()` from its validated config and the
 * ports it `inject`s; it never sees the container. The pipeline (core/pipeline.ts) calls its hooks
 * in these phases, from arrays compiled once at boot per route group:
 *
 * | phase        | when                                         | order                          | may stop the request |
 * | ------------ | -------------------------------------------- | ------------------------------ | -------------------- |
 * | `onRequest`  | headers known, body not read yet             | priority, high first           | yes                  |
 * | `onAccess`   | body read (and parsed for JSON routes)       | priority, high first           | yes                  |
 * | `onForward`  | the group's one terminal plugin builds reply | -                              | -                    |
 * | `onResponse` | reply status/headers known, nothing sent yet | reverse, plugins that ran      | may swap in an error |
 * | `onChunk`    | each streamed SSE event                      | reverse, plugins that ran      | may modify or drop   |
 * | `onLog`      | after the reply ended, failed or was aborted | terminal first, then priority  | never; never throws  |
 *
 * Two more hooks run only inside the terminal plugin, once per upstream attempt of a request routed
 * by a config (`Attempt` in core/context.ts), through the `AttemptGate` it is handed:
 *
 * | hook           | when                                          | order                 | may stop the attempt |
 * | -------------- | --------------------------------------------- | --------------------- | -------------------- |
 * | `onAttempt`    | before an attempt goes upstream               | priority, high first  | yes (refuse / serve) |
 * | `onAttemptEnd` | the attempt will not be the reply (failed, retried, refused) | plugins whose `onAttempt` ran | never |
 *
 * `onLog` order: the group's terminal plugin's `onLog` runs first, then every other plugin's `onLog` by
 * priority (high first), whether or not the request reached the terminal. The terminal plugin is the
 * one that knows how the exchange ended upstream, so its `onLog` finishes the context slots only it
 * can fill (forward: `ctx.usage`, from the reply tail); every later `onLog` (rate-limit and budget
 * charging the real usage, log writing the record) reads the finished context synchronously, with no
 * deferral. The order is compiled once at boot (core/pipeline.ts).
 *
 * A hook stops the request by **returning** a `GatewayError` (sent in the group's error shape) or a
 * `Reply` (sent as is, e.g. a cache hit). Returning `undefined` continues. A hook that *throws* has a
 * bug: the client gets a generic 500 and the error is logged with the plugin name and phase.
 */
import type { Attempt, RequestContext, SseEvent } from './context.js'
import type { GatewayError } from './errors.js'
import type { ByteStream } from './ports.js'
import type { RouteGroup } from './routes.js'
import type { Token } from './service.js'

/** A reply body streamed from a source (an upstream response). */
export interface StreamBody {
  readonly source: ByteStream
  /** Parse the stream as Server-Sent Events (so `onChunk` hooks and error events apply). */
  readonly sse: boolean
  /** Maps an error raised by `source` to what the client is told. */
  readonly toError: (error: unknown) => GatewayError
}

/** A complete reply. `headers` must not contain `content-length`; core sets it. */
export interface Reply {
  readonly status: number
  readonly headers: ReadonlyArray<readonly [string, string]>
  readonly body: Uint8Array | string | StreamBody | null
}

export type HookResult = GatewayError | Reply | undefined
export type Hook = (ctx: RequestContext) => HookResult | Promise<HookResult>

export interface GatewayPlugin {
  /** Headers are known, the body is not read. Authentication lives here. */
  onRequest?(ctx: RequestContext): HookResult | Promise<HookResult>
  /** The body is read (`ctx.rawBody`, and `ctx.body` for JSON routes). */
  onAccess?(ctx: RequestContext): HookResult | Promise<HookResult>
  /**
   * Terminal: produce the reply (or an error). Exactly one plugin per route group has it. `gate`
   * runs the group's `onAttempt` / `onAttemptEnd` hooks for each upstream attempt it makes.
   */
  onForward?(ctx: RequestContext, gate: AttemptGate): Promise<Reply | GatewayError>
  /**
   * An upstream attempt of a config-routed request is about to go out (`Attempt` in core/context.ts). Return a
   * `GatewayError` to refuse it (it counts as a failed attempt), a `Reply` to serve it (a cache hit),
   * or `undefined` to let it go.
   */
  onAttempt?(ctx: RequestContext, attempt: Attempt): HookResult | Promise<HookResult>
  /** The attempt will not be the reply: release what `onAttempt` held for it. Synchronous; must not throw. */
  onAttemptEnd?(ctx: RequestContext, attempt: Attempt): void
  /** The reply is about to be sent; return an error to send that instead. Synchronous. */
  onResponse?(ctx: RequestContext, reply: Reply): GatewayError | undefined
  /** One streamed event; return it (possibly changed), or `null` to drop it. Synchronous. */
  onChunk?(ctx: RequestContext, event: SseEvent): SseEvent | null
  /**
   * Whether this request's streamed reply needs this plugin's `onChunk` (asked once per reply,
   * before it is sent; absent: always). When no plugin of the group wants a reply's events, core
   * relays its bytes as they come instead of parsing and re-serialising every event.
   */
  wantsChunks?(ctx: RequestContext): boolean
  /**
   * The exchange is over (see `ctx.outcome`). Enqueue work only; must not throw. The terminal
   * plugin's `onLog` runs before all others, so slots it fills here are final for them.
   */
  onLog?(ctx: RequestContext): void
  /** Called once at boot, after the ports started and before the server listens (warm caches, seed data). */
  start?(): Promise<void>
  /** Release resources at shutdown. */
  close?(): Promise<void>
}

/**
 * The group's attempt hooks, compiled by the pipeline and handed to the terminal plugin's `onForward`.
 * `admit` runs every `onAttempt` hook (priority order) until one returns a result; `end` runs
 * `onAttemptEnd` of every plugin whose `onAttempt` ran for the attempt. Neither throws: a hook that
 * throws is logged and turned into a 500 refusal (`admit`) or skipped (`end`).
 */
export interface AttemptGate {
  /** `true` when no plugin of the group has `onAttempt`: the router may skip `admit`/`end`. */
  readonly empty: boolean
  admit(ctx: RequestContext, attempt: Attempt): HookResult | Promise<HookResult>
  end(ctx: RequestContext, attempt: Attempt): void
}

export type PhaseName = 'onRequest' | 'onAccess' | 'onForward' | 'onAttempt' | 'onAttemptEnd' | 'onResponse' | 'onChunk' | 'onLog'

/** Structural view of a zod schema, so core does not depend on the validation library. */
export interface ConfigSchema<T> {
  safeParse(input: unknown):
    | { success: true; data: T }
    | { success: false; error: { issues: ReadonlyArray<{ path: ReadonlyArray<PropertyKey>; message: string }> } }
}

/** What a list of tokens stands for, in order: `[Token<A>, Token<B>]` → `[A, B]`. */
export type Injected<I extends readonly Token<unknown>[]> = { readonly [K in keyof I]: I[K] extends Token<infer V> ? V : never }

/**
 * What a plugin module exports. `name` equals its folder and its key in `config/default.json`.
 * `inject` lists the port tokens `create` receives, in order, typed by the tokens (`Injected`): a
 * token added, dropped or reordered without `create` following does not compile. Only the ports of
 * enabled plugins are ever started. With its type parameters left out, a definition is the
 * type-erased form the catalogue and the composition root hold.
 */
export interface PluginDefinition<C = unknown, I extends readonly Token<unknown>[] = readonly Token<unknown>[]> {
  readonly name: string
  /** Default priority (higher runs first); config may override it. Ties are a boot error. */
  readonly priority: number
  /** The route groups whose pipelines include this plugin. */
  readonly groups: readonly RouteGroup[]
  /**
   * Phases it implements: boot refuses a plugin whose hooks differ (core/registry.ts
   * `checkDeclaredPhases`), and a test compares them with the README's configuration table.
   */
  readonly phases: readonly PhaseName[]
  /** Plugins that must also be enabled. */
  readonly requires?: readonly string[]
  readonly configSchema: ConfigSchema<C>
  readonly inject: I
  create(config: C, deps: Injected<I>): GatewayPlugin
}

/** Helps TypeScript check `create` against the config schema and the injected tokens. */
export function definePlugin<C, const I extends readonly Token<unknown>[]>(definition: PluginDefinition<C, I>): PluginDefinition<C, I> {
  return definition
}

const JSON_HEADERS: ReadonlyArray<readonly [string, string]> = [['content-type', 'application/json']]

/** A JSON reply. */
export function jsonReply(status: number, body: unknown, headers?: ReadonlyArray<readonly [string, string]>): Reply {
  return { status, headers: headers ? [...JSON_HEADERS, ...headers] : JSON_HEADERS, body: JSON.stringify(body) }
}
