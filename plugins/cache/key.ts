/**
 * The response cache key of an attempt: a SHA-256 (hex) of everything that decides the answer.
 *
 * What goes in, as one JSON array (so no field can run into the next, whatever it holds), then a
 * newline (JSON text never holds a raw one) and the body:
 * - the tenant: organisation and workspace ids, so one workspace never reads another's entries;
 * - the config and target: the routing plan's id (`<slug>@<version>`, or `inline`), the target's
 *   path, provider, virtual key, custom host and provider key (inline configs; it only enters the
 *   hash), so a new config version or another upstream account starts afresh;
 * - the request: route id, method, path, query, the `x-gateway-*` request headers that reach the
 *   provider (provider options such as `x-gateway-azure-deployment-id`; the gateway's own
 *   per-request headers listed in `IGNORED_HEADERS` are left out), the values of the headers the
 *   target or `x-gateway-forward-headers` forwards, and, for a target with no credential of its own,
 *   the `authorization` header (the provider key it is then sent with);
 * - the body sent (`Attempt.body`: the request's with the target's `override_params`), normalised:
 *   object keys sorted at every depth, arrays and values as they are, `stream` included, so
 *   `{"a":1,"b":2}` and `{"b":2,"a":1}` share an entry while a streamed request never gets a whole
 *   body back (or the reverse). Routes without a parsed body hash the bytes sent.
 */
import { createHash } from 'node:crypto'
import type { JsonObject } from '../../core/context.js'

/** Bumped when the key's make-up changes, so old entries are never read under new rules. */
const KEY_VERSION = 1

/**
 * Request headers that do not change the provider's answer: the gateway credential, tracing,
 * metadata (used by conditional routing, whose pick is the target path), the cache's own header,
 * the timeout, and the config itself (its effect is the target and the body).
 */
export const IGNORED_HEADERS: ReadonlySet<string> = new Set([
  'x-gateway-api-key',
  'x-gateway-trace-id',
  'x-gateway-metadata',
  'x-gateway-cache-force-refresh',
  'x-gateway-request-timeout',
  'x-gateway-config',
])

export interface CacheKeyTarget {
  readonly path: string
  readonly provider: string | null
  readonly apiKey: string | null
  readonly virtualKey: string | null
  readonly customHost: string | null
  readonly forwardHeaders: readonly string[] | null
}

export interface CacheKeyInput {
  readonly organisationId: string
  readonly workspaceId: string | null
  /** `RoutingPlan.id`. */
  readonly routingId: string
  readonly target: CacheKeyTarget
  readonly routeId: string
  readonly method: string
  readonly path: string
  readonly query: string
  /** Request headers, names lower-cased. */
  readonly headers: Readonly<Record<string, string>>
  readonly body: JsonObject | null
  readonly rawBody: Uint8Array | null
}

/** JSON text of `value` with object keys sorted at every depth (the body's normal form). */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null'
  if (Array.isArray(value)) {
    let out = '['
    for (let i = 0; i < value.length; i++) out += (i === 0 ? '' : ',') + canonicalJson(value[i])
    return `${out}]`
  }
  const record = value as Record<string, unknown>
  const keys = Object.keys(record).sort()
  let out = '{'
  let first = true
  for (const key of keys) {
    const item = record[key]
    if (item === undefined) continue
    out += `${first ? '' : ','}${JSON.stringify(key)}:${canonicalJson(item)}`
    first = false
  }
  return `${out}}`
}

/** The request headers that go into the key, as sorted `[name, value]` pairs. */
function keyHeaders(headers: Readonly<Record<string, string>>, target: CacheKeyTarget): Array<[string, string]> {
  const names = new Set<string>()
  for (const name in headers) {
    if (name.startsWith('x-gateway-') && !IGNORED_HEADERS.has(name)) names.add(name)
  }
  for (const name of target.forwardHeaders ?? []) names.add(name)
  const listed = headers['x-gateway-forward-headers']
  if (listed !== undefined) {
    for (const part of listed.split(',')) {
      const name = part.trim().toLowerCase()
      if (name.length > 0) names.add(name)
    }
  }
  // The provider key travels in Authorization only when the target names none of its own.
  if (target.apiKey === null && target.virtualKey === null) names.add('authorization')
  const pairs: Array<[string, string]> = []
  for (const name of [...names].sort()) {
    const value = headers[name]
    if (value !== undefined && !IGNORED_HEADERS.has(name)) pairs.push([name, value])
  }
  return pairs
}

/** The key (64 hex characters) of an attempt's request; see the header for what it covers. */
export function responseCacheKey(input: CacheKeyInput): string {
  const { target } = input
  const head = JSON.stringify([
    KEY_VERSION,
    input.organisationId,
    input.workspaceId,
    input.routingId,
    target.path,
    target.provider,
    target.virtualKey,
    target.customHost,
    target.apiKey,
    input.routeId,
    input.method,
    input.path,
    input.query,
    keyHeaders(input.headers, target),
  ])
  // One update of one string where possible: fewer crossings into the native hash (measured ~20% cheaper).
  if (input.body !== null) return createHash('sha256').update(`${head}\nj${canonicalJson(input.body)}`).digest('hex')
  if (input.rawBody !== null) return createHash('sha256').update(`${head}\nr`).update(input.rawBody).digest('hex')
  return createHash('sha256').update(`${head}\n-`).digest('hex')
}
