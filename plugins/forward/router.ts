/**
 * The config router (API.md §4): walks a request's `RoutingPlan` (`ctx.routing`) and tries its
 * targets as upstream attempts until one serves the reply.
 *
 * - `single` tries its one child; `fallback` tries its children in order and moves on after a
 *   failure whose status is in `on_status_codes` (any failure when unset; a connection failure,
 *   timeout or open circuit always); `loadbalance` picks one child by weight (an open circuit picks
 *   again among the others); `conditional` takes the first child whose query matches the request's
 *   metadata and body params, else `default`, else 400 `GW_CONFIG_NO_TARGET`. Nodes nest to any depth.
 * - A target retries (`retry.attempts`) on a status in `retry.on_status_codes` or a connection
 *   failure, waiting an exponential backoff with jitter (`retryBaseDelayMs` × 2^n, between half and
 *   all of it, at most `retryMaxDelayMs`), or what a 429's `retry-after-ms` / `retry-after` asks
 *   when `use_retry_after_headers` is set (above `maxRetryAfterMs` the target is not retried).
 *   Refusals of the gateway's own hooks (a virtual key's rate limit or budget) are not retried: they
 *   fall back at once.
 * - Before each attempt the group's `onAttempt` hooks run (virtual key, limits, cache); an attempt
 *   not served ends with `onAttemptEnd`. A target with a circuit breaker is skipped while its
 *   circuit is open; every outcome is reported to the breaker.
 * - A stream counts as served once its first chunk arrived: a stream that fails or ends before it
 *   falls back or retries like an error status (the client has seen nothing yet).
 *
 * The reply carries `x-gateway-retry-attempt-count` (retries of the target that answered; -1 when
 * its retries ran out), `x-gateway-last-used-option-index` (its path, `config.targets[1]`) and
 * `x-gateway-cache-status`. When every target failed, the client gets the last failure: the
 * provider's error reply, or the gateway's error.
 */
import { Attempt, type RequestContext } from '../../core/context.js'
import { ERRORS, gatewayError, GatewayError } from '../../core/errors.js'
import type { AttemptGate, Reply, StreamBody } from '../../core/plugin.js'
import type { CircuitBreaker } from '../../core/ports.js'
import { matchesQuery, type RoutingNode, type RoutingPlan, type RoutingTarget } from '../../core/routing-config.js'
import { PrimedStream } from './primed-stream.js'

/** Router settings (from the forward plugin's config). */
export interface RouterSettings {
  readonly retryBaseDelayMs: number
  readonly retryMaxDelayMs: number
  readonly maxRetryAfterMs: number
}

/** The circuit breaker store as the router uses it. */
export type Breaker = Pick<CircuitBreaker, 'allow' | 'record'>

/** Sends one attempt upstream: the reply (any status) or the gateway's error (unreachable, timeout, refused host). */
export type AttemptSender = (ctx: RequestContext, attempt: Attempt) => Promise<Reply | GatewayError>

/** What trying a node came to. */
type Outcome =
  | { readonly served: true; readonly reply: Reply; readonly attempt: Attempt }
  | {
      readonly served: false
      /** The provider's error reply, or `null` when the failure is the gateway's own (`error`). */
      readonly reply: Reply | null
      readonly error: GatewayError | null
      /** The status that decides fallback: the provider's, the refusal's, 0 for no status (connection, timeout, broken stream). */
      readonly status: number
      readonly attempt: Attempt | null
      /** The target's retries ran out. */
      readonly exhausted: boolean
      /** Refused by the gateway's own attempt hooks (a virtual key's limits, an unknown key): falls back, never retried. */
      readonly own: boolean
    }

const CIRCUIT_OPEN = gatewayError(ERRORS.GW_CIRCUIT_OPEN)

export class ConfigRouter {
  readonly #settings: RouterSettings
  readonly #send: AttemptSender
  readonly #breaker: Breaker | null
  readonly #random: () => number

  constructor(settings: RouterSettings, send: AttemptSender, breaker: Breaker | null, random: () => number) {
    this.#settings = settings
    this.#send = send
    this.#breaker = breaker
    this.#random = random
  }

  /** Routes `ctx` by `plan`; never rejects except on a bug. */
  async route(ctx: RequestContext, plan: RoutingPlan, gate: AttemptGate): Promise<Reply | GatewayError> {
    ctx.attempts = []
    const outcome = await this.#node(ctx, plan, plan.root, gate)
    if (outcome.served) {
      ctx.attempt = outcome.attempt
      return withRoutingHeaders(outcome.reply, outcome.attempt, false)
    }
    const last = outcome.attempt
    if (outcome.reply !== null && last !== null) return withRoutingHeaders(outcome.reply, last, outcome.exhausted)
    const error = outcome.error ?? gatewayError(ERRORS.GW_INTERNAL)
    if (last === null) return error
    // The gateway's own error, with the routing headers added (they are part of the error reply).
    const headers: Array<readonly [string, string]> = [...(error.headers ?? []), ...routingHeaders(last, outcome.exhausted)]
    return gatewayError(error, error.message, { param: error.param ?? undefined, headers })
  }

  async #node(ctx: RequestContext, plan: RoutingPlan, node: RoutingNode, gate: AttemptGate): Promise<Outcome> {
    if (node.kind === 'target') return this.#target(ctx, plan, node.target, gate)
    const children = node.children
    switch (node.mode) {
      case 'single':
        return this.#node(ctx, plan, children[0] as RoutingNode, gate)
      case 'fallback': {
        let last: Outcome | null = null
        for (const child of children) {
          if (ctx.signal.aborted) break
          const outcome = await this.#node(ctx, plan, child, gate)
          if (outcome.served) return outcome
          last = outcome
          const moveOn = outcome.status === 0 || outcome.error === CIRCUIT_OPEN || node.onStatusCodes === null || node.onStatusCodes.has(outcome.status)
          if (!moveOn) return outcome
          if (outcome.reply !== null && child !== children[children.length - 1]) discard(outcome.reply)
        }
        return last ?? noTarget()
      }
      case 'loadbalance': {
        const weights = [...node.weights]
        let total = node.totalWeight
        let last: Outcome | null = null
        while (total > 0) {
          const index = pickWeighted(weights, total, this.#random())
          const outcome = await this.#node(ctx, plan, children[index] as RoutingNode, gate)
          // Only an open circuit makes the balancer pick again: any other failure is the answer.
          if (outcome.served || outcome.error !== CIRCUIT_OPEN) return outcome
          last = outcome
          total -= weights[index] as number
          weights[index] = 0
        }
        return last ?? noTarget()
      }
      case 'conditional': {
        const input = { metadata: ctx.metadata, params: ctx.body }
        let index = node.defaultChild
        for (const condition of node.conditions) {
          if (matchesQuery(condition.query, input)) {
            index = condition.child
            break
          }
        }
        if (index === null || index < 0) {
          return { served: false, reply: null, error: gatewayError(ERRORS.GW_CONFIG_NO_TARGET), status: 400, attempt: null, exhausted: false, own: false }
        }
        return this.#node(ctx, plan, children[index] as RoutingNode, gate)
      }
    }
  }

  async #target(ctx: RequestContext, plan: RoutingPlan, target: RoutingTarget, gate: AttemptGate): Promise<Outcome> {
    const attempts = ctx.attempts as Attempt[]
    const breaker = target.breaker === null ? null : this.#breaker
    // Per workspace, config version and target; an inline config has no identity of its own, so its
    // target's provider, key and host are part of the key (two inline configs share a circuit only
    // when they send to the same place).
    const circuitKey =
      breaker === null
        ? ''
        : plan.slug === null
          ? `${ctx.principal?.workspaceId ?? ''}:inline:${target.path}:${target.provider ?? ''}:${target.virtualKey ?? ''}:${target.customHost ?? ''}`
          : `${ctx.principal?.workspaceId ?? ''}:${plan.id}:${target.path}`
    const { body, rawBody } = bodyFor(ctx, target)
    for (let retry = 0; ; retry++) {
      const attempt = new Attempt({ index: attempts.length, target, retry, body, rawBody, startedAt: performance.now() })
      attempts.push(attempt)
      if (breaker !== null) {
        const allowed = breaker.allow(circuitKey, target.breaker!, Date.now())
        if (!(allowed instanceof Promise ? await allowed : allowed)) {
          attempt.error = CIRCUIT_OPEN
          attempt.status = CIRCUIT_OPEN.status
          attempt.endedAt = performance.now()
          return { served: false, reply: null, error: CIRCUIT_OPEN, status: CIRCUIT_OPEN.status, attempt, exhausted: false, own: false }
        }
      }
      const outcome = await this.#attempt(ctx, attempt, gate)
      attempt.endedAt = performance.now()
      // A cache hit or the gateway's own refusal says nothing about the provider's health.
      if (breaker !== null && attempt.cacheStatus !== 'HIT' && !isOwnRefusal(outcome)) {
        const failed = !outcome.served && (attempt.status === 0 || target.breaker!.failureStatusCodes.has(attempt.status))
        breaker.record(circuitKey, target.breaker!, !failed, Date.now())
      }
      if (outcome.served) return outcome
      if (!gate.empty) gate.end(ctx, attempt)
      const retryable = !isOwnRefusal(outcome) && (outcome.status === 0 ? outcome.error?.code !== ERRORS.GW_UPSTREAM_REQUEST_TIMEOUT.code : target.retry.onStatusCodes.has(outcome.status))
      if (!retryable || ctx.signal.aborted) return outcome
      if (retry >= target.retry.attempts) return { ...outcome, exhausted: target.retry.attempts > 0 }
      const delay = this.#delay(target, retry, outcome.reply)
      if (delay === null) return { ...outcome, exhausted: true }
      if (outcome.reply !== null) discard(outcome.reply)
      await sleep(delay, ctx)
      if (ctx.signal.aborted) return outcome
    }
  }

  /** One attempt: the hooks, then upstream; a stream is served only once its first chunk came. */
  async #attempt(ctx: RequestContext, attempt: Attempt, gate: AttemptGate): Promise<Outcome> {
    if (!gate.empty) {
      const admission = gate.admit(ctx, attempt)
      const admitted = admission instanceof Promise ? await admission : admission
      if (admitted instanceof GatewayError) {
        attempt.status = admitted.status
        attempt.error = admitted
        return { served: false, reply: null, error: admitted, status: admitted.status, attempt, exhausted: false, own: true }
      }
      if (admitted !== undefined) {
        attempt.status = admitted.status
        return { served: true, reply: admitted, attempt }
      }
    }
    const sent = await this.#send(ctx, attempt)
    if (sent instanceof GatewayError) {
      // The gateway's own refusals before sending (a custom host not allowed) keep their status; no reply came.
      const status = sent.status === 400 ? 400 : 0
      attempt.status = status
      attempt.error = sent
      return { served: false, reply: null, error: sent, status, attempt, exhausted: false, own: false }
    }
    attempt.status = sent.status
    if (sent.status >= 400) return { served: false, reply: sent, error: null, status: sent.status, attempt, exhausted: false, own: false }
    const body = sent.body
    if (body !== null && typeof body === 'object' && 'source' in body && body.sse) {
      const primed = new PrimedStream(body.source)
      const start = await primed.first
      if (start.kind !== 'data') {
        primed.destroy()
        const error = start.kind === 'error' ? body.toError(start.error) : gatewayError(ERRORS.GW_UPSTREAM_STREAM_BROKEN, 'The provider ended the stream before its first event')
        attempt.status = 0
        attempt.error = error
        return { served: false, reply: null, error, status: 0, attempt, exhausted: false, own: false }
      }
      const stream: StreamBody = { source: primed, sse: true, toError: body.toError }
      return { served: true, reply: { status: sent.status, headers: sent.headers, body: stream }, attempt }
    }
    return { served: true, reply: sent, attempt }
  }

  /** The wait before retry `retry + 1`, or `null` when a 429 asks for longer than `maxRetryAfterMs`. */
  #delay(target: RoutingTarget, retry: number, reply: Reply | null): number | null {
    if (target.retry.useRetryAfter && reply !== null && reply.status === 429) {
      const asked = retryAfterMs(reply)
      if (asked !== null) return asked > this.#settings.maxRetryAfterMs ? null : asked
    }
    const ceiling = Math.min(this.#settings.retryMaxDelayMs, this.#settings.retryBaseDelayMs * 2 ** retry)
    return ceiling / 2 + this.#random() * (ceiling / 2)
  }
}

function isOwnRefusal(outcome: Outcome): boolean {
  return !outcome.served && outcome.own
}

function noTarget(): Outcome {
  return { served: false, reply: null, error: gatewayError(ERRORS.GW_CONFIG_NO_TARGET), status: 400, attempt: null, exhausted: false, own: false }
}

/** Index picked by weight for `draw` in [0, 1). */
export function pickWeighted(weights: readonly number[], total: number, draw: number): number {
  let point = draw * total
  for (let index = 0; index < weights.length; index++) {
    const weight = weights[index] as number
    if (weight <= 0) continue
    if (point < weight) return index
    point -= weight
  }
  // Rounding at the top end: the last target with weight.
  for (let index = weights.length - 1; index >= 0; index--) if ((weights[index] as number) > 0) return index
  return 0
}

/** The body an attempt sends: the request's with the target's `override_params` on top (JSON routes only). */
function bodyFor(ctx: RequestContext, target: RoutingTarget): { body: RequestContext['body']; rawBody: Buffer | null } {
  const overrides = target.overrideParams
  if (overrides === null || ctx.body === null) return { body: ctx.body, rawBody: ctx.rawBody }
  const body = { ...ctx.body, ...overrides }
  return { body, rawBody: Buffer.from(JSON.stringify(body)) }
}

/** `retry-after-ms`, `x-ms-retry-after-ms` (ms) or `retry-after` (seconds or an HTTP date) of a reply. */
function retryAfterMs(reply: Reply): number | null {
  for (const [name, value] of reply.headers) {
    if (name === 'retry-after-ms' || name === 'x-ms-retry-after-ms') {
      const ms = Number(value)
      if (Number.isFinite(ms) && ms >= 0) return ms
    }
  }
  for (const [name, value] of reply.headers) {
    if (name !== 'retry-after') continue
    const seconds = Number(value)
    if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000
    const date = Date.parse(value)
    if (Number.isFinite(date)) return Math.max(0, date - Date.now())
  }
  return null
}

function routingHeaders(attempt: Attempt, exhausted: boolean): Array<readonly [string, string]> {
  return [
    ['x-gateway-retry-attempt-count', exhausted ? '-1' : String(attempt.retry)],
    ['x-gateway-last-used-option-index', attempt.target.path],
    ['x-gateway-cache-status', attempt.cacheStatus ?? 'DISABLED'],
  ]
}

/** The reply with the routing headers added (forward never copies a provider's `x-gateway-*` headers, and a cached reply keeps only its content type). */
function withRoutingHeaders(reply: Reply, attempt: Attempt, exhausted: boolean): Reply {
  return { status: reply.status, headers: [...reply.headers, ...routingHeaders(attempt, exhausted)], body: reply.body }
}

/** Releases a reply that will not be sent. */
function discard(reply: Reply): void {
  const body = reply.body
  if (body !== null && typeof body === 'object' && 'source' in body) body.source.destroy()
}

/** Waits `ms`, or less when the client leaves. */
function sleep(ms: number, ctx: RequestContext): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer)
      ctx.signal.removeListener('abort', done)
      resolve()
    }
    const timer = setTimeout(done, ms)
    ctx.signal.on('abort', done)
  })
}
