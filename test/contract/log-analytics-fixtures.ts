/**
 * A deterministic log set for the LogAnalytics contract suite, and the expected answers computed
 * from it in plain TypeScript (never by SQL), following the definitions documented in
 * adapters/sql/analytics-sql.ts.
 */
import type {
  AnalyticsValue,
  CacheStatus,
  FeedbackRecord,
  GraphName,
  GroupName,
  LogAttempt,
  LogFilter,
  LogRecord,
  LogScope,
} from '../../core/logs.js'

export const ORG_A = 'org-a'
export const ORG_B = 'org-b'
export const WS_1 = 'ws-1'
export const WS_2 = 'ws-2'
export const WS_B = 'ws-b'
export const START = Date.UTC(2025, 2, 1, 0, 0, 0)
export const DAY = 86_400_000
export const END = START + 3 * DAY - 1

/** Mulberry32: small, seeded, the same on every run. */
function random(seed: number): () => number {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296
  }
}

const MODELS = [
  { provider: 'openai', model: 'gpt-4o', prompt: 2500, completion: 10_000 },
  { provider: 'openai', model: 'gpt-4o-mini', prompt: 150, completion: 600 },
  { provider: 'anthropic', model: 'claude-3-5-sonnet', prompt: 3000, completion: 15_000 },
  { provider: 'anthropic', model: 'claude-3-haiku', prompt: 250, completion: 1250 },
] as const
const USERS = ['alice', 'bob', 'carol', null] as const
const ERRORS = [400, 401, 429, 500, 502] as const
/** A metadata key and value made of characters that need quoting in SQL. */
export const ODD_KEY = "team's \\ key"
export const ODD_VALUE = "o'brien\\; --"

export interface LogSet {
  readonly logs: readonly LogRecord[]
  /** Every version of every feedback entry, in insertion order. */
  readonly feedbackVersions: readonly FeedbackRecord[]
}

/**
 * The attempts of a config-routed fixture row, made from its retry count and fallback index
 * (no randomness, so the rest of the set stays as it was): earlier tries fail on the first
 * target, the last one answers on `targets[fallbackIndex]`. Some carry characters JSON and SQL
 * must keep as they are.
 */
function attemptsOf(log: LogRecord, i: number): LogAttempt[] {
  const fallback = log.fallbackIndex ?? 0
  const attempts: LogAttempt[] = []
  for (let k = 0; k <= log.retryCount; k++) {
    const answered = k === log.retryCount
    const moved = answered && fallback > 0
    attempts.push({
      target: `config.targets[${moved ? fallback : 0}]`,
      provider: i % 97 === 0 ? ODD_VALUE : log.provider,
      virtual_key: log.virtualKey,
      status: answered ? log.status : k % 2 === 0 ? 503 : 0,
      latency_ms: answered ? log.latencyMs / 2 : null,
      retry: moved ? 0 : k,
      error_code: answered ? log.errorCode : k % 2 === 0 ? null : 'GW_UPSTREAM_UNREACHABLE',
      cache_status: answered && log.cacheStatus !== 'disabled' ? log.cacheStatus : null,
    })
  }
  return attempts
}

export function generateLogSet(count = 10_000): LogSet {
  const next = random(20250301)
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)] as T
  const logs: LogRecord[] = []
  let previousTime = START
  for (let i = 0; i < count; i++) {
    const tenant = next()
    const organisationId = tenant < 0.8 ? ORG_A : ORG_B
    const workspaceId = tenant < 0.45 ? WS_1 : tenant < 0.8 ? WS_2 : tenant < 0.97 ? WS_B : null
    const target = pick(MODELS)
    const failed = next() < 0.12
    const status = failed ? pick(ERRORS) : 200
    const usage = !failed || next() < 0.2
    const promptTokens = usage ? 10 + Math.floor(next() * 2000) : null
    const completionTokens = usage ? 1 + Math.floor(next() * 1000) : null
    const user = pick(USERS)
    const cacheRoll = next()
    const cacheStatus: CacheStatus = cacheRoll < 0.4 ? 'disabled' : cacheRoll < 0.75 ? 'miss' : cacheRoll < 0.8 ? 'refresh' : cacheRoll < 0.95 ? 'hit' : 'semantic_hit'
    // Some rows share a millisecond with the previous one, to exercise the (created_at, id) order.
    const createdAt = next() < 0.05 ? previousTime : START + Math.floor(next() * 3 * DAY)
    previousTime = createdAt
    const retryRoll = next()
    const retryCount = retryRoll < 0.85 ? 0 : retryRoll < 0.95 ? 1 : 2
    const fallbackIndex = retryCount > 0 && next() < 0.4 ? 1 : next() < 0.3 ? 0 : null
    const metadata: Record<string, string> = { env: next() < 0.7 ? 'prod' : 'staging' }
    if (user !== null) metadata._user = user
    if (next() < 0.1) metadata[ODD_KEY] = next() < 0.5 ? ODD_VALUE : 'plain'
    const traceId = i > 0 && next() < 0.1 ? (logs[i - 1] as LogRecord).traceId : `trace-${String(i).padStart(5, '0')}`
    logs.push({
      id: `log-${String(i).padStart(5, '0')}`,
      traceId,
      source: next() < 0.02 ? 'custom' : 'gateway',
      createdAt,
      organisationId,
      workspaceId,
      apiKeyId: next() < 0.1 ? null : pick(['key-1', 'key-2', 'key-3']),
      user,
      virtualKey: next() < 0.3 ? null : target.provider === 'openai' ? 'vk-openai' : 'vk-anthropic',
      config: next() < 0.5 ? null : pick(['cfg-a', 'cfg-b']),
      promptSlug: next() < 0.8 ? null : 'welcome',
      promptVersion: null,
      method: 'POST',
      route: 'chat.completions',
      path: '/v1/chat/completions',
      provider: target.provider,
      model: target.model,
      status,
      outcome: failed ? 'errored' : 'completed',
      streaming: next() < 0.3,
      latencyMs: Math.round((50 + next() * 4000) * 1000) / 1000,
      ttftMs: failed ? null : Math.round(next() * 500),
      promptTokens,
      completionTokens,
      totalTokens: promptTokens === null || completionTokens === null ? null : promptTokens + completionTokens,
      cachedTokens: null,
      costNanoUsd: promptTokens === null || completionTokens === null ? null : promptTokens * target.prompt + completionTokens * target.completion,
      cacheStatus,
      retryCount,
      fallbackIndex,
      errorCode: failed ? 'GW_UPSTREAM_UNREACHABLE' : null,
      errorType: failed ? 'upstream_error' : null,
      metadata,
      requestBody: i % 1000 === 0 ? '{"messages":[]}' : null,
      responseBody: null,
      configVersion: null,
      attempts: null,
    })
    const last = logs[i] as LogRecord
    if (last.config !== null) logs[i] = { ...last, configVersion: last.config === 'cfg-a' ? 3 : 1, attempts: attemptsOf(last, i) }
  }

  const feedbackVersions: FeedbackRecord[] = []
  const orgALogs = logs.filter((log) => log.organisationId === ORG_A)
  for (let i = 0; i < 600; i++) {
    const log = pick(orgALogs)
    const createdAt = Math.min(END, log.createdAt + Math.floor(next() * 3_600_000))
    const entry: FeedbackRecord = {
      id: `fb-${String(i).padStart(4, '0')}`,
      traceId: log.traceId,
      organisationId: ORG_A,
      workspaceId: log.workspaceId,
      value: Math.floor(next() * 21) - 10,
      weight: pick([0.25, 0.5, 1]),
      metadata: next() < 0.5 ? { source: 'thumbs' } : null,
      createdAt,
      updatedAt: createdAt,
    }
    feedbackVersions.push(entry)
    if (i % 5 === 0) feedbackVersions.push({ ...entry, value: entry.value === 10 ? -10 : entry.value + 1, weight: 1, updatedAt: createdAt + 60_000 })
  }
  // Feedback of another organisation on a trace that also exists in org A: must never be counted there.
  const shared = orgALogs[0] as LogRecord
  feedbackVersions.push({
    id: 'fb-other-org', traceId: shared.traceId, organisationId: ORG_B, workspaceId: WS_B, value: 10, weight: 1, metadata: null,
    createdAt: shared.createdAt, updatedAt: shared.createdAt,
  })
  return { logs, feedbackVersions }
}

/** The current version of every feedback entry. */
export function currentFeedback(versions: readonly FeedbackRecord[]): FeedbackRecord[] {
  const latest = new Map<string, FeedbackRecord>()
  for (const version of versions) {
    const seen = latest.get(version.id)
    if (seen === undefined || version.updatedAt > seen.updatedAt) latest.set(version.id, version)
  }
  return [...latest.values()]
}

// ---------------------------------------------------------------------------------------------
// Expected answers

const BUCKETS = [60, 300, 900, 3600, 21_600, 86_400, 604_800]

export function expectedStep(from: number, to: number): number {
  for (const step of BUCKETS) {
    const first = Math.floor(from / 1000 / step)
    const last = Math.floor(to / 1000 / step)
    if (last - first + 1 <= 100) return step
  }
  return 604_800
}

/** Feedback a scope sees: its organisation's, and within a workspace only that workspace's and the organisation-wide entries. */
export function feedbackVisible(entry: FeedbackRecord, scope: LogScope): boolean {
  if (entry.organisationId !== scope.organisationId) return false
  return scope.workspaceId === null || entry.workspaceId === null || entry.workspaceId === scope.workspaceId
}

function traceWeights(feedback: readonly FeedbackRecord[], scope: LogScope): Map<string, number> {
  const sums = new Map<string, { sum: number; n: number }>()
  for (const entry of feedback) {
    if (!feedbackVisible(entry, scope)) continue
    const acc = sums.get(entry.traceId) ?? { sum: 0, n: 0 }
    acc.sum += entry.value * entry.weight
    acc.n += 1
    sums.set(entry.traceId, acc)
  }
  return new Map([...sums].map(([trace, acc]) => [trace, acc.sum / acc.n]))
}

/** The filter applied to the array, as log-filter-sql.ts defines it. */
export function matches(log: LogRecord, filter: LogFilter, weights: ReadonlyMap<string, number>): boolean {
  const { scope } = filter
  if (log.organisationId !== scope.organisationId) return false
  if (scope.workspaceId !== null && log.workspaceId !== scope.workspaceId) return false
  if (log.createdAt < filter.from || log.createdAt > filter.to) return false
  const inList = <T>(list: readonly T[] | undefined, value: T | null): boolean => list === undefined || list.length === 0 || (value !== null && list.includes(value))
  if (!inList(filter.statusCodes, log.status)) return false
  if (!inList(filter.virtualKeys, log.virtualKey)) return false
  if (!inList(filter.configs, log.config)) return false
  if (!inList(filter.apiKeyIds, log.apiKeyId)) return false
  if (!inList(filter.models, log.model)) return false
  if (!inList(filter.traceIds, log.traceId)) return false
  if (!inList(filter.promptSlugs, log.promptSlug)) return false
  if (!inList(filter.cacheStatuses, log.cacheStatus)) return false
  if (filter.providerModels !== undefined && filter.providerModels.length > 0) {
    if (!filter.providerModels.some((pair) => pair.provider === log.provider && pair.model === log.model)) return false
  }
  for (const [key, value] of Object.entries(filter.metadata ?? {})) {
    if (log.metadata?.[key] !== value) return false
  }
  const within = (value: number | null, range: { min?: number; max?: number } | undefined): boolean => {
    if (range === undefined) return true
    if (range.min === undefined && range.max === undefined) return true
    if (value === null) return false
    return (range.min === undefined || value >= range.min) && (range.max === undefined || value <= range.max)
  }
  if (!within(log.costNanoUsd === null ? null : log.costNanoUsd / 1e7, filter.costCents)) return false
  if (!within(log.totalTokens, filter.totalTokens)) return false
  if (!within(log.promptTokens, filter.promptTokens)) return false
  if (!within(log.completionTokens, filter.completionTokens)) return false
  if (filter.weightedFeedback !== undefined && (filter.weightedFeedback.min !== undefined || filter.weightedFeedback.max !== undefined)) {
    if (!within(weights.get(log.traceId) ?? null, filter.weightedFeedback)) return false
  }
  return true
}

const ratio = (a: number, b: number): number => (b > 0 ? a / b : 0)
const iso = (seconds: number): string => new Date(seconds * 1000).toISOString()

function nearestRank(sorted: readonly number[], percent: number): number {
  if (sorted.length === 0) return 0
  return sorted[Math.ceil((percent * sorted.length) / 100) - 1] as number
}

type Point = Record<string, AnalyticsValue>

/** The expected answers for one filter over the set. */
export class Expected {
  readonly rows: LogRecord[]
  readonly feedback: FeedbackRecord[]
  readonly weights: Map<string, number>
  readonly step: number
  readonly starts: number[]

  constructor(
    set: LogSet,
    readonly filter: LogFilter,
  ) {
    const current = currentFeedback(set.feedbackVersions)
    this.weights = traceWeights(current, filter.scope)
    this.rows = set.logs.filter((log) => matches(log, filter, this.weights))
    const traces = new Set(this.rows.map((log) => log.traceId))
    this.feedback = current.filter(
      (entry) => feedbackVisible(entry, filter.scope) && traces.has(entry.traceId) && entry.createdAt >= filter.from && entry.createdAt <= filter.to,
    )
    this.step = expectedStep(filter.from, filter.to)
    this.starts = []
    for (let s = Math.floor(filter.from / 1000 / this.step) * this.step; s <= Math.floor(filter.to / 1000 / this.step) * this.step; s += this.step) this.starts.push(s)
  }

  #byBucket<T extends { createdAt: number }>(items: readonly T[]): Map<number, T[]> {
    const map = new Map<number, T[]>()
    for (const item of items) {
      const bucket = Math.floor(item.createdAt / 1000 / this.step) * this.step
      const list = map.get(bucket) ?? []
      list.push(item)
      map.set(bucket, list)
    }
    return map
  }

  #points<T extends { createdAt: number }>(items: readonly T[], make: (bucket: readonly T[]) => Point): Point[] {
    const byBucket = this.#byBucket(items)
    return this.starts.map((start) => ({ timestamp: iso(start), ...make(byBucket.get(start) ?? []) }))
  }

  graph(name: GraphName): { summary: Point; dataPoints: Point[] } {
    const rows = this.rows
    const costOf = (list: readonly LogRecord[]): { total: number; avg: number } => {
      const used = list.filter((log) => log.costNanoUsd !== null)
      const total = used.reduce((sum, log) => sum + (log.costNanoUsd as number), 0) / 1e7
      return { total, avg: ratio(total, used.length) }
    }
    const tokensOf = (list: readonly LogRecord[]): { total: number; avg: number } => {
      const used = list.filter((log) => log.totalTokens !== null)
      const total = used.reduce((sum, log) => sum + (log.totalTokens as number), 0)
      return { total, avg: ratio(total, used.length) }
    }
    const latencyOf = (list: readonly LogRecord[]): Point => {
      const sorted = list.map((log) => log.latencyMs).sort((a, b) => a - b)
      return {
        avg: ratio(sorted.reduce((a, b) => a + b, 0), sorted.length),
        p50: nearestRank(sorted, 50),
        p90: nearestRank(sorted, 90),
        p99: nearestRank(sorted, 99),
      }
    }
    const users = (list: readonly LogRecord[]): Set<string> => new Set(list.flatMap((log) => (log.user === null ? [] : [log.user])))
    const errors = (list: readonly LogRecord[]): LogRecord[] => list.filter((log) => log.status >= 400)
    const isHit = (log: LogRecord): boolean => log.cacheStatus === 'hit' || log.cacheStatus === 'semantic_hit'
    const rescued = (list: readonly LogRecord[]) => {
      const ok = list.filter((log) => log.status < 400 && (log.retryCount > 0 || (log.fallbackIndex ?? 0) > 0))
      const fallback = ok.filter((log) => (log.fallbackIndex ?? 0) > 0)
      const retry = ok.filter((log) => !((log.fallbackIndex ?? 0) > 0))
      const byCount = new Map<number, number>()
      for (const log of retry) byCount.set(log.retryCount, (byCount.get(log.retryCount) ?? 0) + 1)
      return { fallback: fallback.length, retry: retry.length, retryStats: [...byCount].sort((a, b) => a[0] - b[0]).map(([k, count]) => ({ retry_success_count: k, count })) }
    }
    switch (name) {
      case 'requests':
        return { summary: { total: rows.length }, dataPoints: this.#points(rows, (b) => ({ total: b.length })) }
      case 'cost':
        return { summary: costOf(rows), dataPoints: this.#points(rows, (b) => costOf(b)) }
      case 'tokens':
        return { summary: tokensOf(rows), dataPoints: this.#points(rows, (b) => tokensOf(b)) }
      case 'latency':
        return { summary: latencyOf(rows), dataPoints: this.#points(rows, (b) => latencyOf(b)) }
      case 'users':
        return { summary: { total: users(rows).size }, dataPoints: this.#points(rows, (b) => ({ total: users(b).size })) }
      case 'users/requests': {
        const withUser = (list: readonly LogRecord[]): number => list.filter((log) => log.user !== null).length
        return {
          summary: { total: withUser(rows), unique: users(rows).size, avg: ratio(withUser(rows), users(rows).size) },
          dataPoints: this.#points(rows, (b) => ({ avg: ratio(withUser(b), users(b).size) })),
        }
      }
      case 'errors':
        return { summary: { total: errors(rows).length }, dataPoints: this.#points(rows, (b) => ({ total: errors(b).length })) }
      case 'errors/rate':
        return { summary: { rate: ratio(errors(rows).length, rows.length) * 100 }, dataPoints: this.#points(rows, (b) => ({ rate: ratio(errors(b).length, b.length) * 100 })) }
      case 'errors/stacks': {
        const stats = (list: readonly LogRecord[]) => {
          const counts = new Map<number, number>()
          for (const log of errors(list)) counts.set(log.status, (counts.get(log.status) ?? 0) + 1)
          return [...counts].sort((a, b) => a[0] - b[0]).map(([code, count]) => ({ response_status_code: code, count }))
        }
        return { summary: { total: errors(rows).length }, dataPoints: this.#points(rows, (b) => ({ stats: stats(b) })) }
      }
      case 'errors/status-codes': {
        const counts = new Map<number, number>()
        for (const log of errors(rows)) counts.set(log.status, (counts.get(log.status) ?? 0) + 1)
        return {
          summary: { total_errors: errors(rows).length, unique_error_codes: counts.size },
          dataPoints: [...counts].sort((a, b) => a[0] - b[0]).map(([status_code, count]) => ({ status_code, count })),
        }
      }
      case 'requests/rescued': {
        const all = rescued(rows)
        return { summary: { retry: all.retry, fallback: all.fallback }, dataPoints: this.#points(rows, (b) => { const r = rescued(b); return { retry: r.retryStats, fallback: r.fallback } }) }
      }
      case 'cache/hit-rate': {
        let simpleSaved = 0
        let semanticSaved = 0
        const consulted = (list: readonly LogRecord[]): number => list.filter((log) => log.cacheStatus !== 'disabled').length
        const dataPoints = this.#points(rows, (b) => {
          const simple = b.filter((log) => log.cacheStatus === 'hit')
          const semantic = b.filter((log) => log.cacheStatus === 'semantic_hit')
          simpleSaved += simple.reduce((sum, log) => sum + (log.costNanoUsd ?? 0), 0)
          semanticSaved += semantic.reduce((sum, log) => sum + (log.costNanoUsd ?? 0), 0)
          return {
            simple_hits: simple.length,
            semantic_hits: semantic.length,
            rate: ratio(simple.length + semantic.length, consulted(b)) * 100,
            cumulative_simple_cache_savings: simpleSaved / 1e7,
            cumulative_semantic_cache_savings: semanticSaved / 1e7,
          }
        })
        const hits = rows.filter(isHit).length
        return { summary: { total: hits, rate: ratio(hits, consulted(rows)) * 100 }, dataPoints }
      }
      case 'cache/latency':
        return {
          summary: {},
          dataPoints: this.#points(rows, (b) => {
            const hits = b.filter(isHit)
            return { avg: ratio(hits.reduce((sum, log) => sum + log.latencyMs, 0), hits.length) }
          }),
        }
      case 'feedbacks':
        return { summary: { total: this.feedback.length }, dataPoints: this.#points(this.feedback, (b) => ({ total: b.length })) }
      case 'feedbacks/weighted': {
        const avg = (list: readonly FeedbackRecord[]): number => ratio(list.reduce((sum, f) => sum + f.value * f.weight, 0), list.length)
        return { summary: { avg: avg(this.feedback) }, dataPoints: this.#points(this.feedback, (b) => ({ avg: avg(b) })) }
      }
      case 'feedbacks/scores': {
        const counts = new Map<number, number>()
        for (const entry of this.feedback) counts.set(entry.value, (counts.get(entry.value) ?? 0) + 1)
        return { summary: { total: this.feedback.length }, dataPoints: [...counts].sort((a, b) => a[0] - b[0]).map(([score, total]) => ({ score, total })) }
      }
      case 'feedbacks/ai-models': {
        const traceModels = new Map<string, Set<string>>()
        for (const log of rows) {
          if (log.model === null) continue
          const set = traceModels.get(log.traceId) ?? new Set<string>()
          set.add(log.model)
          traceModels.set(log.traceId, set)
        }
        const acc = new Map<string, { n: number; sum: number }>()
        for (const entry of this.feedback) {
          for (const model of traceModels.get(entry.traceId) ?? []) {
            const a = acc.get(model) ?? { n: 0, sum: 0 }
            a.n += 1
            a.sum += entry.value * entry.weight
            acc.set(model, a)
          }
        }
        const dataPoints = [...acc]
          .sort((a, b) => b[1].n - a[1].n || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
          .map(([ai_model, a]) => ({ ai_model, total: a.n, avg_weighted_feedback: a.sum / a.n }))
        return { summary: {}, dataPoints }
      }
    }
  }

  group(name: GroupName, metadataKey?: string): { total: number; rows: Point[] } {
    const keyOf: Record<Exclude<GroupName, 'metadata'>, [string, (log: LogRecord) => string | number | null, boolean]> = {
      users: ['user', (log) => log.user, true],
      'ai-models': ['ai_model', (log) => log.model, false],
      providers: ['provider', (log) => log.provider, true],
      'api-keys': ['api_key_id', (log) => log.apiKeyId, true],
      'virtual-keys': ['virtual_key', (log) => log.virtualKey, true],
      configs: ['config', (log) => log.config, true],
      'status-codes': ['status_code', (log) => log.status, true],
    }
    const compare = (a: [string | number, { n: number }], b: [string | number, { n: number }]): number =>
      b[1].n - a[1].n || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)
    if (name === 'metadata') {
      const key = metadataKey as string
      const acc = new Map<string, { n: number; cost: number; tokens: number; usage: number; fbSum: number; fbN: number; last: number }>()
      for (const log of this.rows) {
        const value = log.metadata?.[key]
        if (value === undefined) continue
        const a = acc.get(value) ?? { n: 0, cost: 0, tokens: 0, usage: 0, fbSum: 0, fbN: 0, last: 0 }
        a.n += 1
        a.cost += log.costNanoUsd ?? 0
        if (log.totalTokens !== null) {
          a.tokens += log.totalTokens
          a.usage += 1
        }
        const weight = this.weights.get(log.traceId)
        if (weight !== undefined) {
          a.fbSum += weight
          a.fbN += 1
        }
        a.last = Math.max(a.last, log.createdAt)
        acc.set(value, a)
      }
      const rows = [...acc].sort(compare).map(([value, a]) => ({
        metadata_value: value,
        requests: a.n,
        cost: a.cost / 1e7,
        avg_tokens: ratio(a.tokens, a.usage),
        avg_weighted_feedback: a.fbN > 0 ? a.fbSum / a.fbN : null,
        requests_with_feedback: a.fbN,
        last_seen: new Date(a.last).toISOString(),
      }))
      return { total: rows.length, rows }
    }
    const [field, key, withCost] = keyOf[name]
    const acc = new Map<string | number, { n: number; cost: number }>()
    for (const log of this.rows) {
      const value = key(log)
      if (value === null) continue
      const a = acc.get(value) ?? { n: 0, cost: 0 }
      a.n += 1
      a.cost += log.costNanoUsd ?? 0
      acc.set(value, a)
    }
    const rows = [...acc].sort(compare).map(([value, a]) => {
      const row: Point = { [field]: value, requests: a.n }
      if (withCost) row.cost = a.cost / 1e7
      return row
    })
    return { total: rows.length, rows }
  }

  cacheSummary() {
    const hits = this.rows.filter((log) => log.cacheStatus === 'hit' || log.cacheStatus === 'semantic_hit')
    const misses = this.rows.filter((log) => log.cacheStatus === 'miss')
    const avg = (list: readonly LogRecord[]): number => ratio(list.reduce((sum, log) => sum + log.latencyMs, 0), list.length)
    const hitAvg = avg(hits)
    const missAvg = avg(misses)
    return { hits: hits.length, avgLatency: hitAvg, totalRequests: this.rows.length, cacheSpeedup: hits.length > 0 && missAvg > 0 ? ((missAvg - hitAvg) / missAvg) * 100 : 0 }
  }

  /** Matching logs in (createdAt, id) order. */
  ordered(): LogRecord[] {
    return [...this.rows].sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
  }
}
