/**
 * The phase runner. One `Pipeline` per route group, compiled at boot from the enabled plugins of
 * that group: each phase is a plain array of bound hooks, so a request does no lookups and builds
 * no closures to run them (see core/plugin.ts for the phase table).
 *
 * Between `onRequest` and `onAccess` the pipeline itself refuses bad input with 400: on data-plane
 * groups an `x-gateway-metadata` header that is not a JSON object of strings (`ctx.metadata`), and
 * on JSON routes a body that is not a JSON object or nests deeper than 64 levels (`ctx.body`).
 *
 * "Plugins that ran" (for `onResponse` and `onChunk`): the plugins ranked at or above the one that
 * stopped the request, or all of them when the terminal plugin produced the reply.
 *
 * `onLog`: the terminal plugin's hook first, then the others by priority (core/plugin.ts), so the
 * slots the terminal fills there (`ctx.usage`) are final for every other hook. The array is ordered
 * once here; running it costs nothing more per request.
 */
import type { Attempt, JsonObject, RequestContext, SseEvent } from './context.js'
import {
  ERRORS,
  GatewayError,
  gatewayError,
  toControlPlaneBody,
  toDataPlaneBody,
  toMessagesBody,
  type ApiFormat,
} from './errors.js'
import { JSON_TOO_DEEP_MESSAGE, jsonTooDeep } from './json-depth.js'
import { METADATA_HEADER, parseMetadataHeader } from './json-metadata.js'
import type { AttemptGate, GatewayPlugin, HookResult, Reply } from './plugin.js'
import type { RouteGroup } from './routes.js'
import type { Logger } from './service.js'

/** Rewrites or drops one streamed event; `null` when the pipeline has no `onChunk` hooks. */
export type EventTransform = (ctx: RequestContext, event: SseEvent) => SseEvent | null

/**
 * The client side of one exchange, implemented by core/http. The pipeline decides *what* to send;
 * the exchange knows *how* (uWS, corking, backpressure, aborts).
 */
export interface ClientExchange {
  /** The request body, bounded by the route's limit; a `GatewayError` (413) when it is larger. */
  readBody(): Promise<Buffer | GatewayError>
  /**
   * Sends the reply. Returns nothing when it is already over (a whole body written in one go, or
   * the client gone), else a promise that resolves once it ended, failed or the client went away.
   * Records `ctx.status`, `ctx.firstByteAt`, `ctx.endedAt`, `ctx.outcome`, `ctx.responseTail`.
   */
  send(ctx: RequestContext, reply: Reply, transform: EventTransform | null): Promise<void> | undefined
}

/** Wire shape of errors for a group: OpenAI-shaped (data plane) or Admin API envelope. */
export type ErrorShape = 'data' | 'control'

/** An enabled plugin as a pipeline member. */
export interface PipelineMember {
  readonly name: string
  readonly plugin: GatewayPlugin
}

interface Step<F> {
  readonly name: string
  readonly rank: number
  readonly fn: F
}

type RequestHook = (ctx: RequestContext) => HookResult | Promise<HookResult>
type ResponseHook = (ctx: RequestContext, reply: Reply) => GatewayError | undefined
type ChunkHook = (ctx: RequestContext, event: SseEvent) => SseEvent | null
type WantsChunks = (ctx: RequestContext) => boolean
type LogHook = (ctx: RequestContext) => void
type AttemptHook = (ctx: RequestContext, attempt: Attempt) => HookResult | Promise<HookResult>
type AttemptEndHook = (ctx: RequestContext, attempt: Attempt) => void
type TerminalHook = (ctx: RequestContext, gate: AttemptGate) => Promise<Reply | GatewayError>

const JSON_CONTENT_TYPE: readonly [string, string] = ['content-type', 'application/json']

function stepsOf<F>(members: readonly PipelineMember[], phase: keyof GatewayPlugin): Step<F>[] {
  const steps: Step<F>[] = []
  members.forEach((member, rank) => {
    const hook = member.plugin[phase]
    if (typeof hook === 'function') steps.push({ name: member.name, rank, fn: hook.bind(member.plugin) as F })
  })
  return steps
}

/** `steps` with the terminal plugin's step (rank `terminalRank`), if it has one, moved to the front. */
function terminalFirst<F>(steps: readonly Step<F>[], terminalRank: number): Step<F>[] {
  return [...steps.filter((step) => step.rank === terminalRank), ...steps.filter((step) => step.rank !== terminalRank)]
}

function isPromise<T>(value: T | Promise<T>): value is Promise<T> {
  return typeof (value as { then?: unknown } | undefined)?.then === 'function'
}

export class Pipeline {
  readonly group: RouteGroup
  readonly errorShape: ErrorShape
  readonly #size: number
  readonly #onRequest: readonly Step<RequestHook>[]
  readonly #onAccess: readonly Step<RequestHook>[]
  readonly #terminal: Step<TerminalHook>
  readonly #gate: AttemptGate
  readonly #onResponse: readonly Step<ResponseHook>[]
  readonly #onChunk: readonly Step<ChunkHook>[]
  readonly #onLog: readonly Step<LogHook>[]
  readonly #fullTransform: EventTransform | null
  /** Per `onChunk` step (same order), its plugin's `wantsChunks`, or `null` when it always wants them. */
  readonly #wantsChunks: ReadonlyArray<{ readonly rank: number; readonly wants: WantsChunks | null }>
  /** Whether every `onChunk` plugin can decline a reply (then the transform is chosen per request). */
  readonly #chunksOptional: boolean
  /** Data-plane groups check `x-gateway-metadata` (API.md §2); the Admin API has no use for it. */
  readonly #checksMetadata: boolean
  readonly #logger: Logger

  /**
   * @param members enabled plugins of the group, priority high first; exactly one has `onForward`
   *   (checked by core/registry.ts).
   */
  constructor(group: RouteGroup, errorShape: ErrorShape, members: readonly PipelineMember[], logger: Logger) {
    this.group = group
    this.errorShape = errorShape
    this.#size = members.length
    this.#onRequest = stepsOf(members, 'onRequest')
    this.#onAccess = stepsOf(members, 'onAccess')
    const terminal = stepsOf<TerminalHook>(members, 'onForward')
    if (terminal.length !== 1) throw new Error(`route group "${group}" needs exactly one terminal plugin`)
    this.#terminal = terminal[0] as Step<TerminalHook>
    this.#gate = new PipelineAttemptGate(stepsOf<AttemptHook>(members, 'onAttempt'), stepsOf<AttemptEndHook>(members, 'onAttemptEnd'), logger)
    this.#onResponse = stepsOf<ResponseHook>(members, 'onResponse').reverse()
    this.#onChunk = stepsOf<ChunkHook>(members, 'onChunk').reverse()
    this.#wantsChunks = this.#onChunk.map((step) => {
      const plugin = members[step.rank]!.plugin
      return { rank: step.rank, wants: typeof plugin.wantsChunks === 'function' ? plugin.wantsChunks.bind(plugin) : null }
    })
    this.#chunksOptional = this.#wantsChunks.length > 0 && this.#wantsChunks.every((entry) => entry.wants !== null)
    this.#onLog = terminalFirst(stepsOf<LogHook>(members, 'onLog'), this.#terminal.rank)
    this.#logger = logger
    this.#checksMetadata = group === 'inference' || group === 'passthrough'
    this.#fullTransform = this.#transformFor(this.#size)
  }

  /** Runs one request through every phase. Never rejects. */
  async handle(ctx: RequestContext, exchange: ClientExchange): Promise<void> {
    let reply: Reply
    let reached = this.#size
    let phase = 'onRequest'
    let current = ''
    try {
      let result: HookResult = undefined
      for (const step of this.#onRequest) {
        current = step.name
        const value = step.fn(ctx)
        result = isPromise(value) ? await value : value
        if (result !== undefined) {
          reached = step.rank + 1
          break
        }
      }
      // After onRequest (a caller who is not authenticated learns nothing about its headers) and
      // before onAccess (nothing is counted or reserved for a request refused here).
      if (result === undefined && this.#checksMetadata) {
        const metadata = ctx.headers[METADATA_HEADER]
        if (metadata !== undefined) {
          phase = 'metadata'
          current = ''
          const parsed = parseMetadataHeader(metadata)
          if (parsed instanceof GatewayError) result = parsed
          else ctx.metadata = parsed
        }
      }
      if (result === undefined && ctx.route.body !== 'none') {
        phase = 'body'
        current = ''
        result = await this.#readBody(ctx, exchange)
      }
      if (result === undefined) {
        phase = 'onAccess'
        for (const step of this.#onAccess) {
          current = step.name
          const value = step.fn(ctx)
          result = isPromise(value) ? await value : value
          if (result !== undefined) {
            reached = step.rank + 1
            break
          }
        }
      }
      if (result === undefined) {
        phase = 'onForward'
        current = this.#terminal.name
        result = await this.#terminal.fn(ctx, this.#gate)
      }
      reply = result instanceof GatewayError ? this.errorReply(ctx, result) : (result as Reply)
      phase = 'onResponse'
      for (const step of this.#onResponse) {
        if (step.rank >= reached) continue
        current = step.name
        const replacement = step.fn(ctx, reply)
        if (replacement !== undefined) {
          discard(reply)
          reply = this.errorReply(ctx, replacement)
          break
        }
      }
    } catch (error) {
      this.#logger.error({ err: error, plugin: current, phase, group: this.group, requestId: ctx.requestId }, 'plugin hook threw')
      reply = this.errorReply(ctx, gatewayError(ERRORS.GW_INTERNAL))
    }
    try {
      const sending = exchange.send(ctx, reply, this.#transformOf(ctx, reply, reached))
      if (sending !== undefined) await sending
    } catch (error) {
      this.#logger.error({ err: error, group: this.group, requestId: ctx.requestId }, 'sending the reply failed')
    }
    this.#runOnLog(ctx)
    // A whole reply's tail is a view on its bytes: nothing may keep them alive past onLog (budget
    // settlement, for one, holds the context for a round trip).
    ctx.responseTail = null
  }

  /** Turns an error into a reply in this group's shape (and the route's format) and records it in `ctx.error`. */
  errorReply(ctx: RequestContext, error: GatewayError): Reply {
    ctx.error = error
    return errorReplyOf(error, this.errorShape, ctx.route.format)
  }

  async #readBody(ctx: RequestContext, exchange: ClientExchange): Promise<GatewayError | undefined> {
    const body = await exchange.readBody()
    if (body instanceof GatewayError) return body
    ctx.rawBody = body
    const mode = ctx.route.body
    if (mode !== 'json' && mode !== 'json-optional') return undefined
    if (mode === 'json-optional' && body.length === 0) {
      ctx.body = {}
      return undefined
    }
    let parsed: unknown
    try {
      parsed = JSON.parse(body.toString('utf8'))
    } catch {
      return gatewayError(ERRORS.GW_REQ_MALFORMED_JSON, body.length === 0 ? 'The request body is empty: send a JSON object' : undefined)
    }
    if (jsonTooDeep(body, parsed)) return gatewayError(ERRORS.GW_REQ_INVALID, JSON_TOO_DEEP_MESSAGE)
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
      return gatewayError(ERRORS.GW_REQ_MALFORMED_JSON, 'The request body must be a JSON object')
    }
    ctx.body = parsed as JsonObject
    return undefined
  }

  /**
   * The event transform for this reply: none unless it streams and some plugin that ran wants its
   * events (`wantsChunks`), so a stream nobody rewrites is relayed without parsing.
   */
  #transformOf(ctx: RequestContext, reply: Reply, reached: number): EventTransform | null {
    const transform = reached === this.#size ? this.#fullTransform : this.#transformFor(reached)
    if (transform === null || !this.#chunksOptional) return transform
    const body = reply.body
    if (body === null || typeof body !== 'object' || !('source' in body)) return null
    for (const entry of this.#wantsChunks) if (entry.rank < reached && entry.wants!(ctx)) return transform
    return null
  }

  #transformFor(reached: number): EventTransform | null {
    const steps = this.#onChunk.filter((step) => step.rank < reached)
    if (steps.length === 0) return null
    return (ctx, event) => {
      let current: SseEvent | null = event
      for (const step of steps) {
        current = step.fn(ctx, current)
        if (current === null) return null
      }
      return current
    }
  }

  #runOnLog(ctx: RequestContext): void {
    for (const step of this.#onLog) {
      try {
        step.fn(ctx)
      } catch (error) {
        this.#logger.error({ err: error, plugin: step.name, phase: 'onLog', requestId: ctx.requestId }, 'onLog hook threw')
      }
    }
  }
}

/**
 * The group's `onAttempt` / `onAttemptEnd` hooks (`Attempt` in core/context.ts), in priority order. A hook that
 * throws has a bug: it is logged and the attempt refused with a generic 500 (`admit`) or skipped (`end`).
 */
class PipelineAttemptGate implements AttemptGate {
  readonly empty: boolean
  readonly #admit: readonly Step<AttemptHook>[]
  readonly #end: readonly Step<AttemptEndHook>[]
  readonly #logger: Logger

  /** Ranks of the plugins with `onAttempt` (an `onAttemptEnd` alone never runs). */
  readonly #admitRanks: ReadonlySet<number>

  constructor(admit: readonly Step<AttemptHook>[], end: readonly Step<AttemptEndHook>[], logger: Logger) {
    this.#admit = admit
    this.#admitRanks = new Set(admit.map((step) => step.rank))
    this.#end = end
    this.#logger = logger
    this.empty = admit.length === 0
  }

  /** Synchronous while the hooks are (most attempts: nothing to look up), async from the first pending one. */
  admit(ctx: RequestContext, attempt: Attempt): HookResult | Promise<HookResult> {
    const steps = this.#admit
    for (let index = 0; index < steps.length; index++) {
      const step = steps[index] as Step<AttemptHook>
      attempt.hooksRan += 1
      let value: HookResult | Promise<HookResult>
      try {
        value = step.fn(ctx, attempt)
      } catch (error) {
        return this.#threw(ctx, step, error)
      }
      if (isPromise(value)) return this.#admitFrom(ctx, attempt, value, step, index)
      if (value !== undefined) return value
    }
    return undefined
  }

  /** The rest of `admit` once step `index` returned a promise. */
  async #admitFrom(ctx: RequestContext, attempt: Attempt, pending: Promise<HookResult>, step: Step<AttemptHook>, index: number): Promise<HookResult> {
    let current = step
    try {
      const first = await pending
      if (first !== undefined) return first
      const steps = this.#admit
      for (let next = index + 1; next < steps.length; next++) {
        current = steps[next] as Step<AttemptHook>
        attempt.hooksRan += 1
        const value = current.fn(ctx, attempt)
        const result = isPromise(value) ? await value : value
        if (result !== undefined) return result
      }
      return undefined
    } catch (error) {
      return this.#threw(ctx, current, error)
    }
  }

  #threw(ctx: RequestContext, step: Step<AttemptHook>, error: unknown): GatewayError {
    this.#logger.error({ err: error, plugin: step.name, phase: 'onAttempt', requestId: ctx.requestId }, 'plugin hook threw')
    return gatewayError(ERRORS.GW_INTERNAL)
  }

  end(ctx: RequestContext, attempt: Attempt): void {
    // The admit steps run in rank order, so those that ran are exactly the first `hooksRan`.
    const ran = attempt.hooksRan
    if (ran === 0) return
    const lastRank = (this.#admit[ran - 1] as Step<AttemptHook>).rank
    for (const step of this.#end) {
      if (step.rank > lastRank || !this.#admitRanks.has(step.rank)) continue
      try {
        step.fn(ctx, attempt)
      } catch (error) {
        this.#logger.error({ err: error, plugin: step.name, phase: 'onAttemptEnd', requestId: ctx.requestId }, 'plugin hook threw')
      }
    }
  }
}

/** An error as a reply in the given wire shape; on the data plane, in the route's format (API.md §2). */
export function errorReplyOf(error: GatewayError, shape: ErrorShape, format: ApiFormat = 'openai'): Reply {
  const headers: Array<readonly [string, string]> = [JSON_CONTENT_TYPE]
  if (error.headers !== null) headers.push(...error.headers)
  const body = shape === 'control' ? toControlPlaneBody(error) : format === 'messages' ? toMessagesBody(error) : toDataPlaneBody(error)
  return { status: error.status, headers, body }
}

/** Releases an upstream stream that will not be sent. */
function discard(reply: Reply): void {
  const body = reply.body
  if (body !== null && typeof body === 'object' && 'source' in body) body.source.destroy()
}
