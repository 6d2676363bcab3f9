/**
 * Routing configs (API.md §4): the one schema that checks a config, whether it is saved through the
 * Admin API (`/v1/configs`) or sent inline in `x-gateway-config`, and its compiled form, the
 * `RoutingPlan` that forward's router walks per request.
 *
 * The schema is strict: an unknown or misspelt field (`retyr`) is an error naming its path
 * (`targets[1].retyr`), never silently ignored, because an ignored routing rule sends traffic where
 * its author did not mean it to go. Every error names the offending path in the config, in the
 * `targets[1].retry.attempts` form.
 *
 * Core uses zod here (DESIGN.md §1 names it for config validation) because the same schema serves two
 * plugins, the Admin API and the data plane, and plugins share code only through core.
 *
 * Compilation resolves inheritance down the tree once (saved configs are compiled once per version
 * and cached; inline ones per request): `override_params` merge (the child's keys win), `retry`,
 * `cache` and `strategy.cb_config` are replaced whole by a child's, `request_timeout`,
 * `custom_host` and `forward_headers` are the child's when it sets them, else the parent's.
 */
import { z } from 'zod'

/** Most retries of one target (the reference system documents 5). */
export const MAX_RETRY_ATTEMPTS = 5
/** Longest request timeout a config may set (10 minutes). */
export const MAX_CONFIG_REQUEST_TIMEOUT_MS = 600_000
/** Longest `cache.max_age` (90 days, as the reference system) and its default (7 days). */
export const MAX_CACHE_AGE_S = 7_776_000
export const DEFAULT_CACHE_AGE_S = 604_800
/** Deepest nesting of `targets` and most targets in one config: bounds the work per request. */
export const MAX_CONFIG_DEPTH = 8
export const MAX_CONFIG_TARGETS = 64
/** Largest config JSON (saved or inline). */
export const MAX_CONFIG_BYTES = 65_536
/** Status codes retried when `retry.on_status_codes` is not set (API.md §4). */
export const DEFAULT_RETRY_STATUS_CODES: readonly number[] = [429, 500, 502, 503, 504]
/** Status codes a circuit breaker counts as failures when `failure_status_codes` is not set. */
export const DEFAULT_BREAKER_STATUS_CODES: readonly number[] = [429, 500, 502, 503, 504]

/** A JSON object (as `JsonObject` in core/context.ts, which builds on this module). */
type JsonObject = Record<string, unknown>

export type StrategyMode = 'single' | 'fallback' | 'loadbalance' | 'conditional'

/** Where a config comes from: saved ones may pair a virtual key with a custom host and may not hold provider keys. */
export type ConfigOrigin = 'saved' | 'inline'

const QUERY_OPERATORS = new Set(['$eq', '$ne', '$in', '$nin', '$gt', '$gte', '$lt', '$lte'])
const NAME = z.string().min(1).max(128)
const STATUS_CODES = z.array(z.number().int().min(100).max(599)).max(50)

const retrySchema = z
  .object({
    attempts: z.number().int().min(0).max(MAX_RETRY_ATTEMPTS),
    on_status_codes: STATUS_CODES.optional(),
    use_retry_after_headers: z.boolean().optional(),
    /** The reference system's own spelling, accepted as the same setting. */
    use_retry_after_header: z.boolean().optional(),
  })
  .strict()

const cacheSchema = z
  .object({
    mode: z.literal('simple'),
    max_age: z.number().int().min(1).max(MAX_CACHE_AGE_S).optional(),
  })
  .strict()

const breakerSchema = z
  .object({
    failure_threshold: z.number().int().min(1).max(1000),
    cooldown_interval: z.number().int().min(1000).max(3_600_000),
    failure_status_codes: STATUS_CODES.optional(),
  })
  .strict()

const strategySchema = z
  .object({
    mode: z.enum(['single', 'fallback', 'loadbalance', 'conditional']),
    on_status_codes: STATUS_CODES.optional(),
    conditions: z
      .array(z.object({ query: z.record(z.string(), z.unknown()), then: NAME }).strict())
      .min(1)
      .max(50)
      .optional(),
    default: NAME.optional(),
    cb_config: breakerSchema.optional(),
  })
  .strict()

/** A config (or one of its targets) as written, snake_case. */
export interface ConfigNodeInput {
  name?: string
  weight?: number
  strategy?: z.infer<typeof strategySchema>
  targets?: ConfigNodeInput[]
  provider?: string
  api_key?: string
  virtual_key?: string
  custom_host?: string
  override_params?: Record<string, unknown>
  retry?: z.infer<typeof retrySchema>
  request_timeout?: number
  cache?: z.infer<typeof cacheSchema>
  forward_headers?: string[]
}

const nodeSchema: z.ZodType<ConfigNodeInput> = z.lazy(() =>
  z
    .object({
      name: NAME.optional(),
      weight: z.number().min(0).max(1_000_000).optional(),
      strategy: strategySchema.optional(),
      targets: z.array(nodeSchema).min(1).max(MAX_CONFIG_TARGETS).optional(),
      provider: z.string().min(1).max(64).optional(),
      api_key: z.string().min(1).max(8192).optional(),
      virtual_key: z.string().min(1).max(200).optional(),
      custom_host: z.string().min(1).max(2048).optional(),
      override_params: z.record(z.string(), z.unknown()).optional(),
      retry: retrySchema.optional(),
      request_timeout: z.number().int().min(1).max(MAX_CONFIG_REQUEST_TIMEOUT_MS).optional(),
      cache: cacheSchema.optional(),
      forward_headers: z
        .array(
          z
            .string()
            .min(1)
            .max(128)
            .regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/, 'must be a header name'),
        )
        .max(50)
        .optional(),
    })
    .strict(),
)

/** One problem in a config: where (`targets[1].retry.attempts`, `` for the whole config) and what. */
export interface ConfigIssue {
  readonly path: string
  readonly message: string
}

export type ConfigCheck = { readonly ok: true; readonly config: ConfigNodeInput } | { readonly ok: false; readonly issues: readonly ConfigIssue[] }

/** `['targets', 1, 'retry']` → `targets[1].retry`. */
export function formatConfigPath(path: ReadonlyArray<PropertyKey>): string {
  let text = ''
  for (const part of path) {
    if (typeof part === 'number') text += `[${part}]`
    else text += text.length === 0 ? String(part) : `.${String(part)}`
  }
  return text
}

/**
 * Checks a parsed config against the schema and the rules between its fields. Every issue names
 * its path; at most 20 are reported.
 */
export function checkRoutingConfig(input: unknown, origin: ConfigOrigin): ConfigCheck {
  if (input === null || typeof input !== 'object' || Array.isArray(input)) {
    return { ok: false, issues: [{ path: '', message: 'a config must be a JSON object' }] }
  }
  const parsed = nodeSchema.safeParse(input)
  if (!parsed.success) {
    const issues: ConfigIssue[] = []
    for (const issue of parsed.error.issues.slice(0, 20)) {
      // zod reports unknown fields on their object; name each field itself.
      if (issue.code === 'unrecognized_keys') {
        for (const key of issue.keys) issues.push({ path: formatConfigPath([...issue.path, key]), message: 'unknown field' })
      } else {
        issues.push({ path: formatConfigPath(issue.path), message: issue.message })
      }
    }
    return { ok: false, issues: issues.slice(0, 20) }
  }
  const issues: ConfigIssue[] = []
  const counter = { targets: 0 }
  checkNode(parsed.data, [], 0, origin, false, issues, counter)
  if (counter.targets > MAX_CONFIG_TARGETS) issues.push({ path: '', message: `a config may hold at most ${MAX_CONFIG_TARGETS} targets in all` })
  return issues.length === 0 ? { ok: true, config: parsed.data } : { ok: false, issues: issues.slice(0, 20) }
}

/** Parses and checks an inline config (`x-gateway-config` holding JSON). */
export function parseInlineConfig(text: string): ConfigCheck {
  if (text.length > MAX_CONFIG_BYTES) return { ok: false, issues: [{ path: '', message: `an inline config may be at most ${MAX_CONFIG_BYTES} bytes` }] }
  let input: unknown
  try {
    input = JSON.parse(text)
  } catch {
    return { ok: false, issues: [{ path: '', message: 'x-gateway-config is neither a config slug nor valid JSON' }] }
  }
  return checkRoutingConfig(input, 'inline')
}

function checkNode(
  node: ConfigNodeInput,
  path: PropertyKey[],
  depth: number,
  origin: ConfigOrigin,
  parentHost: boolean,
  issues: ConfigIssue[],
  counter: { targets: number },
): void {
  const at = (...more: PropertyKey[]): string => formatConfigPath([...path, ...more])
  const targets = node.targets
  const strategy = node.strategy
  if (depth > MAX_CONFIG_DEPTH) {
    issues.push({ path: at(), message: `targets may nest at most ${MAX_CONFIG_DEPTH} levels deep` })
    return
  }
  if (depth > 0) counter.targets += 1
  if (targets !== undefined && strategy === undefined) issues.push({ path: at('strategy'), message: 'a config with targets needs strategy.mode' })
  if (strategy !== undefined && targets === undefined) issues.push({ path: at('targets'), message: `strategy.mode "${strategy.mode}" needs targets` })
  if (targets !== undefined) {
    for (const field of ['provider', 'api_key', 'virtual_key'] as const) {
      if (node[field] !== undefined) issues.push({ path: at(field), message: `a config with targets routes to them: set ${field} on a target` })
    }
  } else if (depth > 0 && node.provider === undefined && node.virtual_key === undefined) {
    issues.push({ path: at(), message: 'a target needs provider, virtual_key, or strategy and targets' })
  }
  const customHost = parentHost || node.custom_host !== undefined
  if (node.virtual_key !== undefined) {
    // API.md §2: a client may not point a stored credential at a host of its choosing; a saved
    // config is written through the Admin API by someone who may (its host is checked on use).
    if (origin === 'inline' && customHost) {
      issues.push({ path: at('custom_host'), message: "an inline config may not pair virtual_key with custom_host: set the virtual key's custom_host through the Admin API" })
    }
    if (node.provider !== undefined) issues.push({ path: at('provider'), message: "a target with virtual_key takes the key's provider: drop provider" })
    if (node.api_key !== undefined) issues.push({ path: at('api_key'), message: "a target with virtual_key takes the key's credential: drop api_key" })
  }
  if (node.api_key !== undefined) {
    if (origin === 'saved') {
      issues.push({ path: at('api_key'), message: 'a saved config may not hold provider keys: store the key as a virtual key and name it with virtual_key' })
    } else if (node.provider === undefined) {
      issues.push({ path: at('api_key'), message: 'api_key needs provider' })
    }
  }
  if (strategy !== undefined && targets !== undefined) checkStrategy(strategy, targets, path, issues)
  if (node.forward_headers !== undefined) {
    node.forward_headers.forEach((name, index) => {
      if (name.toLowerCase().startsWith('x-gateway-')) issues.push({ path: at('forward_headers', index), message: 'the gateway’s own x-gateway-* headers are never forwarded' })
    })
  }
  if (targets !== undefined) targets.forEach((target, index) => checkNode(target, [...path, 'targets', index], depth + 1, origin, customHost, issues, counter))
}

function checkStrategy(strategy: NonNullable<ConfigNodeInput['strategy']>, targets: readonly ConfigNodeInput[], path: PropertyKey[], issues: ConfigIssue[]): void {
  const at = (...more: PropertyKey[]): string => formatConfigPath([...path, ...more])
  const mode = strategy.mode
  if (mode === 'single' && targets.length > 1) {
    issues.push({ path: at('targets'), message: 'strategy.mode "single" takes one target: use fallback or loadbalance for more' })
  }
  if (strategy.on_status_codes !== undefined && mode !== 'fallback') {
    issues.push({ path: at('strategy', 'on_status_codes'), message: 'on_status_codes applies to strategy.mode "fallback"' })
  }
  if (mode === 'loadbalance' && !targets.some((target) => (target.weight ?? 1) > 0)) {
    issues.push({ path: at('targets'), message: 'loadbalance needs at least one target with a weight above 0' })
  }
  const names = new Map<string, number>()
  targets.forEach((target, index) => {
    if (target.name === undefined) return
    if (names.has(target.name)) issues.push({ path: at('targets', index, 'name'), message: `target name "${target.name}" is used twice` })
    else names.set(target.name, index)
  })
  if (mode === 'conditional') {
    if (strategy.conditions === undefined) issues.push({ path: at('strategy', 'conditions'), message: 'strategy.mode "conditional" needs conditions' })
    strategy.conditions?.forEach((condition, index) => {
      if (!names.has(condition.then)) issues.push({ path: at('strategy', 'conditions', index, 'then'), message: `no target is named "${condition.then}"` })
      checkQuery(condition.query, [...path, 'strategy', 'conditions', index, 'query'], 0, issues)
    })
    if (strategy.default !== undefined && !names.has(strategy.default)) {
      issues.push({ path: at('strategy', 'default'), message: `no target is named "${strategy.default}"` })
    }
  } else {
    if (strategy.conditions !== undefined) issues.push({ path: at('strategy', 'conditions'), message: 'conditions apply to strategy.mode "conditional"' })
    if (strategy.default !== undefined) issues.push({ path: at('strategy', 'default'), message: 'default applies to strategy.mode "conditional"' })
  }
}

/** A condition query: `metadata.<key>` / `params.<key>` fields and `$and` / `$or` lists (API.md §4). */
function checkQuery(query: Record<string, unknown>, path: PropertyKey[], depth: number, issues: ConfigIssue[]): void {
  if (depth > 8) {
    issues.push({ path: formatConfigPath(path), message: 'a query may nest $and/$or at most 8 levels deep' })
    return
  }
  for (const [key, value] of Object.entries(query)) {
    const at = formatConfigPath([...path, key])
    if (key === '$and' || key === '$or') {
      if (!Array.isArray(value) || value.length === 0) {
        issues.push({ path: at, message: `${key} takes a non-empty array of queries` })
        continue
      }
      value.forEach((item, index) => {
        if (item === null || typeof item !== 'object' || Array.isArray(item)) issues.push({ path: formatConfigPath([...path, key, index]), message: 'must be a query object' })
        else checkQuery(item as Record<string, unknown>, [...path, key, index], depth + 1, issues)
      })
      continue
    }
    if (!/^(metadata|params)\.[^.]{1,128}$/.test(key)) {
      issues.push({ path: at, message: 'a query field is metadata.<key> or params.<key> (or $and / $or)' })
      continue
    }
    if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
      const operators = Object.entries(value as Record<string, unknown>)
      if (operators.length === 0) issues.push({ path: at, message: 'an operator object needs at least one operator' })
      for (const [operator, operand] of operators) {
        const opAt = formatConfigPath([...path, key, operator])
        if (!QUERY_OPERATORS.has(operator)) {
          issues.push({ path: opAt, message: `unknown operator; use one of ${[...QUERY_OPERATORS].join(', ')}` })
        } else if ((operator === '$in' || operator === '$nin') !== Array.isArray(operand)) {
          issues.push({ path: opAt, message: operator === '$in' || operator === '$nin' ? `${operator} takes an array` : `${operator} takes a single value` })
        } else if (!isScalarOperand(operand)) {
          issues.push({ path: opAt, message: 'operands are strings, numbers, booleans or null (or arrays of them for $in / $nin)' })
        }
      }
    } else if (!isScalarOperand(value) || Array.isArray(value)) {
      issues.push({ path: at, message: 'a field matches a string, number, boolean or null, or an operator object' })
    }
  }
}

function isScalarOperand(value: unknown): boolean {
  if (Array.isArray(value)) return value.length <= 100 && value.every((item) => isScalarOperand(item) && !Array.isArray(item))
  return value === null || typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean'
}

// ---------------------------------------------------------------------------------------------
// Compiled form

export interface RetrySetting {
  /** Retries after the first try (0: none). */
  readonly attempts: number
  readonly onStatusCodes: ReadonlySet<number>
  /** Wait what a 429's `retry-after-ms` / `retry-after` asks (capped), instead of the backoff. */
  readonly useRetryAfter: boolean
}

export interface CacheSetting {
  readonly maxAgeSeconds: number
}

export interface BreakerSetting {
  /** Failures in a row that open the circuit. */
  readonly failureThreshold: number
  /** How long an open circuit refuses the target before one probe may go (ms). */
  readonly cooldownMs: number
  readonly failureStatusCodes: ReadonlySet<number>
}

/** A leaf of a config: one upstream the router may try. */
export interface RoutingTarget {
  /** Where it sits, as sent in `x-gateway-last-used-option-index`: `config`, `config.targets[1].targets[0]`. */
  readonly path: string
  /** `null` with a virtual key (its provider), or for a config without targets (the request's own selection). */
  readonly provider: string | null
  /** Inline configs only; never logged. */
  readonly apiKey: string | null
  readonly virtualKey: string | null
  readonly customHost: string | null
  /** Merged down the tree; applied over the request body (override wins). */
  readonly overrideParams: JsonObject | null
  readonly retry: RetrySetting
  readonly requestTimeoutMs: number | null
  readonly cache: CacheSetting | null
  readonly forwardHeaders: readonly string[] | null
  /** The circuit breaker of the strategy this target belongs to. */
  readonly breaker: BreakerSetting | null
}

export type RoutingNode =
  | { readonly kind: 'target'; readonly target: RoutingTarget }
  | {
      readonly kind: 'strategy'
      readonly path: string
      readonly mode: StrategyMode
      /** Fallback moves on only on these statuses (and connection failures); `null`: on any non-2xx. */
      readonly onStatusCodes: ReadonlySet<number> | null
      readonly children: readonly RoutingNode[]
      /** Loadbalance weights, one per child, and their sum. */
      readonly weights: readonly number[]
      readonly totalWeight: number
      /** Conditional: queries in order, each with the index of its child. */
      readonly conditions: ReadonlyArray<{ readonly query: Readonly<Record<string, unknown>>; readonly child: number }>
      /** Conditional: the child taken when no condition matches, or `null` (then 400). */
      readonly defaultChild: number | null
    }

/** A compiled config, ready for the router. */
export interface RoutingPlan {
  /** `<slug>@<version>` for a saved config, `inline` otherwise: what the request log records. */
  readonly id: string
  /** The saved config's slug (analytics group by it), `null` for an inline one. */
  readonly slug: string | null
  readonly version: number | null
  readonly root: RoutingNode
  /** Whether any target asks for the response cache (the cache plugin does nothing otherwise). */
  readonly usesCache: boolean
  /** Whether any target names a virtual key (resolved per attempt). */
  readonly usesVirtualKeys: boolean
}

interface Inherited {
  readonly overrideParams: JsonObject | null
  readonly retry: RetrySetting
  readonly requestTimeoutMs: number | null
  readonly cache: CacheSetting | null
  readonly customHost: string | null
  readonly forwardHeaders: readonly string[] | null
  readonly breaker: BreakerSetting | null
}

const NO_RETRY: RetrySetting = { attempts: 0, onStatusCodes: new Set(DEFAULT_RETRY_STATUS_CODES), useRetryAfter: false }

/** Compiles a checked config (see `checkRoutingConfig`). */
export function compileRoutingConfig(config: ConfigNodeInput, identity: { slug: string; version: number } | null): RoutingPlan {
  const flags = { usesCache: false, usesVirtualKeys: false }
  const root = compileNode(config, 'config', { overrideParams: null, retry: NO_RETRY, requestTimeoutMs: null, cache: null, customHost: null, forwardHeaders: null, breaker: null }, flags)
  return {
    id: identity === null ? 'inline' : `${identity.slug}@${identity.version}`,
    slug: identity?.slug ?? null,
    version: identity?.version ?? null,
    root,
    usesCache: flags.usesCache,
    usesVirtualKeys: flags.usesVirtualKeys,
  }
}

function compileNode(node: ConfigNodeInput, path: string, parent: Inherited, flags: { usesCache: boolean; usesVirtualKeys: boolean }): RoutingNode {
  const inherited: Inherited = {
    overrideParams: node.override_params === undefined ? parent.overrideParams : { ...(parent.overrideParams ?? {}), ...node.override_params },
    retry:
      node.retry === undefined
        ? parent.retry
        : {
            attempts: node.retry.attempts,
            onStatusCodes: new Set(node.retry.on_status_codes ?? DEFAULT_RETRY_STATUS_CODES),
            useRetryAfter: node.retry.use_retry_after_headers ?? node.retry.use_retry_after_header ?? false,
          },
    requestTimeoutMs: node.request_timeout ?? parent.requestTimeoutMs,
    cache: node.cache === undefined ? parent.cache : { maxAgeSeconds: node.cache.max_age ?? DEFAULT_CACHE_AGE_S },
    customHost: node.custom_host ?? parent.customHost,
    forwardHeaders: node.forward_headers === undefined ? parent.forwardHeaders : node.forward_headers.map((name) => name.toLowerCase()),
    breaker: parent.breaker,
  }
  const strategy = node.strategy
  const targets = node.targets
  if (strategy === undefined || targets === undefined) {
    if (inherited.cache !== null) flags.usesCache = true
    if (node.virtual_key !== undefined) flags.usesVirtualKeys = true
    return {
      kind: 'target',
      target: {
        path,
        provider: node.provider ?? null,
        apiKey: node.api_key ?? null,
        virtualKey: node.virtual_key ?? null,
        customHost: inherited.customHost,
        overrideParams: inherited.overrideParams,
        retry: inherited.retry,
        requestTimeoutMs: inherited.requestTimeoutMs,
        cache: inherited.cache,
        forwardHeaders: inherited.forwardHeaders,
        breaker: inherited.breaker,
      },
    }
  }
  const cb = strategy.cb_config
  const childInherited: Inherited =
    cb === undefined
      ? inherited
      : {
          ...inherited,
          breaker: {
            failureThreshold: cb.failure_threshold,
            cooldownMs: cb.cooldown_interval,
            failureStatusCodes: new Set(cb.failure_status_codes ?? DEFAULT_BREAKER_STATUS_CODES),
          },
        }
  const children = targets.map((target, index) => compileNode(target, `${path}.targets[${index}]`, childInherited, flags))
  const weights = targets.map((target) => target.weight ?? 1)
  const indexOfName = (name: string): number => targets.findIndex((target) => target.name === name)
  return {
    kind: 'strategy',
    path,
    mode: strategy.mode,
    onStatusCodes: strategy.on_status_codes === undefined ? null : new Set(strategy.on_status_codes),
    children,
    weights,
    totalWeight: weights.reduce((sum, weight) => sum + weight, 0),
    conditions: (strategy.conditions ?? []).map((condition) => ({ query: condition.query, child: indexOfName(condition.then) })),
    defaultChild: strategy.default === undefined ? null : indexOfName(strategy.default),
  }
}

// ---------------------------------------------------------------------------------------------
// Conditions

/** What a condition query reads: the request's metadata and its body's top-level params. */
export interface QueryInput {
  readonly metadata: Readonly<Record<string, string>> | null
  readonly params: JsonObject | null
}

/** Whether a (checked) query matches. Numbers compare as numbers, a numeric string against a number as its value. */
export function matchesQuery(query: Readonly<Record<string, unknown>>, input: QueryInput): boolean {
  for (const key in query) {
    const expected = query[key]
    if (key === '$and') {
      if (!(expected as Array<Record<string, unknown>>).every((item) => matchesQuery(item, input))) return false
      continue
    }
    if (key === '$or') {
      if (!(expected as Array<Record<string, unknown>>).some((item) => matchesQuery(item, input))) return false
      continue
    }
    const dot = key.indexOf('.')
    const source = key.slice(0, dot)
    const field = key.slice(dot + 1)
    const actual = source === 'metadata' ? input.metadata?.[field] : input.params?.[field]
    if (expected !== null && typeof expected === 'object' && !Array.isArray(expected)) {
      for (const operator in expected as Record<string, unknown>) {
        if (!applyOperator(operator, actual, (expected as Record<string, unknown>)[operator])) return false
      }
    } else if (!same(actual, expected)) {
      return false
    }
  }
  return true
}

function applyOperator(operator: string, actual: unknown, operand: unknown): boolean {
  switch (operator) {
    case '$eq':
      return same(actual, operand)
    case '$ne':
      return !same(actual, operand)
    case '$in':
      return (operand as unknown[]).some((item) => same(actual, item))
    case '$nin':
      return !(operand as unknown[]).some((item) => same(actual, item))
    case '$gt':
    case '$gte':
    case '$lt':
    case '$lte': {
      const left = comparable(actual)
      const right = comparable(operand)
      if (left === null || right === null || typeof left !== typeof right) return false
      if (operator === '$gt') return left > right
      if (operator === '$gte') return left >= right
      if (operator === '$lt') return left < right
      return left <= right
    }
    default:
      return false
  }
}

/** Equality where metadata (always strings) meets numbers and booleans in the query: `"3"` equals `3`. */
function same(actual: unknown, expected: unknown): boolean {
  if (actual === expected) return true
  if (actual === undefined) return expected === null
  if (typeof actual === 'string' && (typeof expected === 'number' || typeof expected === 'boolean')) return actual === String(expected)
  return false
}

/** A number for numbers and numeric strings, the string itself otherwise; `null` when absent. */
function comparable(value: unknown): number | string | null {
  if (typeof value === 'number') return Number.isFinite(value) ? value : null
  if (typeof value === 'string') {
    const number = value.trim().length === 0 ? Number.NaN : Number(value)
    return Number.isFinite(number) ? number : value
  }
  return null
}
