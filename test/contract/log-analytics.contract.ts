/**
 * Contract suite of the `LogAnalytics` port: the same generated log set is written straight into
 * each store's tables (not through a sink), and every answer is checked against figures computed
 * from the generated array in TypeScript (log-analytics-fixtures.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { GRAPH_NAMES, GROUP_NAMES, type LogAnalytics, type LogFilter, type StoredLog } from '../../core/logs.js'
import {
  DAY,
  END,
  Expected,
  ODD_KEY,
  ODD_VALUE,
  ORG_A,
  ORG_B,
  START,
  WS_1,
  WS_2,
  currentFeedback,
  generateLogSet,
  type LogSet,
} from './log-analytics-fixtures.js'

export interface LogAnalyticsHarness {
  readonly analytics: LogAnalytics
  /** Writes the set's logs and every feedback version into the store's tables. */
  insert(set: LogSet): Promise<void>
  /** Rows currently in `request_logs` and `feedback` (to prove the tables survived). */
  counts(): Promise<{ logs: number; feedback: number }>
  close(): Promise<void>
}

/** Numbers equal up to floating-point summation order; everything else exactly. */
function expectClose(actual: unknown, expected: unknown, path = '$'): void {
  if (typeof expected === 'number') {
    expect(typeof actual, path).toBe('number')
    const tolerance = 1e-9 * Math.max(1, Math.abs(expected))
    if (Math.abs((actual as number) - expected) > tolerance) expect(actual, path).toBe(expected)
    return
  }
  if (Array.isArray(expected)) {
    expect(Array.isArray(actual), path).toBe(true)
    expect((actual as unknown[]).length, `${path}.length`).toBe(expected.length)
    expected.forEach((item, index) => expectClose((actual as unknown[])[index], item, `${path}[${index}]`))
    return
  }
  if (expected !== null && typeof expected === 'object') {
    expect(actual !== null && typeof actual === 'object', path).toBe(true)
    expect(Object.keys(actual as object).sort(), `${path} keys`).toEqual(Object.keys(expected).sort())
    for (const [key, value] of Object.entries(expected)) expectClose((actual as Record<string, unknown>)[key], value, `${path}.${key}`)
    return
  }
  expect(actual, path).toEqual(expected)
}

const orgA = { organisationId: ORG_A, workspaceId: null }
const ws1 = { organisationId: ORG_A, workspaceId: WS_1 }
const ws2 = { organisationId: ORG_A, workspaceId: WS_2 }
const SET = generateLogSet()
const PROMPTED_TRACES = SET.logs.filter((log) => log.workspaceId === WS_1 && log.promptSlug === 'welcome').slice(0, 3).map((log) => log.traceId)

/** Filters covering the whole range, shorter ranges (other bucket sizes) and every filter field. */
const FILTERS: ReadonlyArray<{ readonly label: string; readonly filter: LogFilter }> = [
  { label: 'organisation, 3 days', filter: { scope: orgA, from: START, to: END } },
  { label: 'workspace 1, 3 days', filter: { scope: ws1, from: START, to: END } },
  { label: 'organisation B', filter: { scope: { organisationId: ORG_B, workspaceId: null }, from: START, to: END } },
  { label: 'workspace 2, one unaligned day', filter: { scope: ws2, from: START + DAY / 2 + 12_345, to: START + DAY + DAY / 2 + 6_789 } },
  { label: 'organisation, 90 minutes', filter: { scope: orgA, from: START + DAY + 1_000, to: START + DAY + 90 * 60_000 } },
  {
    label: 'workspace 2, list filters',
    filter: {
      scope: ws2, from: START, to: END,
      statusCodes: [200, 429], virtualKeys: ['vk-openai', 'vk-anthropic'], configs: ['cfg-a'], apiKeyIds: ['key-1', 'key-2'],
      cacheStatuses: ['miss', 'hit', 'disabled'], metadata: { env: 'prod' },
    },
  },
  {
    label: 'organisation, model and range filters',
    filter: {
      scope: orgA, from: START, to: END,
      providerModels: [{ provider: 'openai', model: 'gpt-4o' }, { provider: 'anthropic', model: 'claude-3-haiku' }],
      models: ['gpt-4o', 'claude-3-haiku', 'gpt-4o-mini'], costCents: { min: 0.5, max: 1500 }, totalTokens: { min: 100, max: 2500 },
      promptTokens: { min: 50 }, completionTokens: { max: 900 },
    },
  },
  { label: 'organisation, weighted feedback ≥ 0', filter: { scope: orgA, from: START, to: END, weightedFeedback: { min: 0 } } },
  { label: 'workspace 1, trace ids and prompt', filter: { scope: ws1, from: START, to: END, traceIds: [...PROMPTED_TRACES, 'trace-00001'], promptSlugs: ['welcome'] } },
  { label: 'organisation, odd metadata', filter: { scope: orgA, from: START, to: END, metadata: { [ODD_KEY]: ODD_VALUE } } },
  { label: 'organisation, one config', filter: { scope: orgA, from: START, to: END, configs: ['cfg-b'] } },
  { label: 'workspace 1, forced cache refreshes and hits', filter: { scope: ws1, from: START, to: END, cacheStatuses: ['refresh', 'hit'] } },
]

/** Values that would break out of a naively built literal. */
const NASTY = [
  "x' OR '1'='1",
  "x'; DROP TABLE request_logs; --",
  "x\\' OR 1=1 --",
  'x\\',
  "x\\\\' OR 1=1 /*",
  'x\u0000y',
  "x'||(SELECT 1)||'",
  'x") OR ("1"="1',
  '😀\u2028\u202e\ud800',
  '*/ OR 1=1 --',
  "x' UNION ALL SELECT * FROM request_logs --",
]

export function logAnalyticsContract(name: string, makeHarness: () => Promise<LogAnalyticsHarness>): void {
  describe(`LogAnalytics contract: ${name}`, () => {
    let harness: LogAnalyticsHarness
    let analytics: LogAnalytics
    const set = SET
    const before = { logs: set.logs.length, feedback: set.feedbackVersions.length }

    beforeAll(async () => {
      harness = await makeHarness()
      analytics = harness.analytics
      await harness.insert(set)
    })

    afterAll(async () => {
      await harness?.close()
    })

    it('holds the generated set', async () => {
      expect(await harness.counts()).toEqual(before)
    })

    describe.each(FILTERS)('graphs: $label', ({ filter }) => {
      const expected = new Expected(set, filter)
      it('the filter selects some rows (the case is meaningful)', () => {
        expect(expected.rows.length).toBeGreaterThan(0)
      })
      it.each(GRAPH_NAMES.map((graph) => [graph]))('%s', async (graph) => {
        const actual = await analytics.graph(graph, filter)
        expectClose(actual, expected.graph(graph))
      })
    })

    describe.each([...FILTERS.slice(0, 7), ...FILTERS.slice(-2)])('groups and cache summary: $label', ({ filter }) => {
      const expected = new Expected(set, filter)
      it.each(GROUP_NAMES.filter((group) => group !== 'metadata').map((group) => [group]))('%s', async (group) => {
        const whole = await analytics.group({ name: group, page: 0, pageSize: 1000 }, filter)
        expectClose(whole, expected.group(group))
      })
      it.each([['env'], ['_user'], [ODD_KEY], ['absent']])('metadata/%s', async (key) => {
        const whole = await analytics.group({ name: 'metadata', metadataKey: key, page: 0, pageSize: 1000 }, filter)
        expectClose(whole, expected.group('metadata', key))
      })
      it('cache summary', async () => {
        expectClose(await analytics.cacheSummary(filter), expected.cacheSummary())
      })
    })

    it('pages groups with a stable order and the full total', async () => {
      const filter: LogFilter = { scope: orgA, from: START, to: END }
      const expected = new Expected(set, filter).group('api-keys')
      const first = await analytics.group({ name: 'api-keys', page: 0, pageSize: 2 }, filter)
      const second = await analytics.group({ name: 'api-keys', page: 1, pageSize: 2 }, filter)
      const beyond = await analytics.group({ name: 'api-keys', page: 5, pageSize: 2 }, filter)
      expect(first.total).toBe(expected.total)
      expectClose(first.rows, expected.rows.slice(0, 2))
      expectClose(second.rows, expected.rows.slice(2, 4))
      expect(beyond).toEqual({ total: expected.total, rows: [] })
    })

    it('picks buckets from the range, aligned on UTC multiples and zero-filled', async () => {
      const hour = await analytics.graph('requests', { scope: orgA, from: START, to: END })
      expect(hour.dataPoints).toHaveLength(72)
      expect(hour.dataPoints[0]?.timestamp).toBe('2025-03-01T00:00:00.000Z')
      expect(hour.dataPoints[1]?.timestamp).toBe('2025-03-01T01:00:00.000Z')
      const empty = await analytics.graph('latency', { scope: orgA, from: START - 10 * DAY, to: START - 9 * DAY })
      expect(empty.summary).toEqual({ avg: 0, p50: 0, p90: 0, p99: 0 })
      expect(empty.dataPoints.length).toBeGreaterThan(0)
      expect(empty.dataPoints.every((point) => point.avg === 0 && point.p99 === 0)).toBe(true)
      const month = await analytics.graph('requests', { scope: orgA, from: START, to: START + 30 * DAY })
      expect(month.dataPoints).toHaveLength(31)
    })

    describe('single records', () => {
      const some = set.logs.find((log) => log.organisationId === ORG_A && log.workspaceId === WS_1 && log.requestBody !== null) ?? set.logs[0]!
      const weights = new Expected(set, { scope: orgA, from: START, to: END }).weights

      it('finds a log by id within its organisation and workspace, with its feedback', async () => {
        const found = await analytics.findLog(ws1, some.id)
        expect(found).toEqual({ ...some, weightedFeedback: weights.get(some.traceId) ?? null })
        expect(await analytics.findLog(orgA, some.id)).not.toBeNull()
        expect(await analytics.findLog(ws2, some.id)).toBeNull()
        expect(await analytics.findLog({ organisationId: ORG_B, workspaceId: null }, some.id)).toBeNull()
        expect(await analytics.findLog(orgA, 'no-such-log')).toBeNull()
      })

      it('finds the latest log of a trace when no id matches', async () => {
        const rated = currentFeedback(set.feedbackVersions).find((entry) => entry.organisationId === ORG_A)!
        const traceLogs = new Expected(set, { scope: orgA, from: START, to: END }).ordered().filter((log) => log.traceId === rated.traceId)
        const latest = traceLogs[traceLogs.length - 1]!
        const found = await analytics.findLog(orgA, rated.traceId)
        expect(found?.id).toBe(latest.id)
        expect(found?.weightedFeedback).toBeCloseTo(weights.get(rated.traceId)!, 9)
      })

      it('returns a config-routed log with its config version and every attempt, as written', async () => {
        const routed = set.logs.filter((log) => log.organisationId === ORG_A && log.attempts !== null && log.attempts.length > 1)
        const odd = routed.find((log) => log.attempts?.some((attempt) => attempt.provider === ODD_VALUE))
        expect(odd).toBeDefined()
        for (const log of [routed[0]!, odd!]) {
          expect(await analytics.findLog(orgA, log.id)).toEqual({ ...log, weightedFeedback: weights.get(log.traceId) ?? null })
        }
        const plain = set.logs.find((log) => log.organisationId === ORG_A && log.config === null)!
        expect(await analytics.findLog(orgA, plain.id)).toMatchObject({ config: null, configVersion: null, attempts: null })
      })

      it('knows which traces a scope has', async () => {
        expect(await analytics.hasTrace(ws1, some.traceId)).toBe(true)
        expect(await analytics.hasTrace(orgA, some.traceId)).toBe(true)
        expect(await analytics.hasTrace(ws2, some.traceId)).toBe(set.logs.some((log) => log.traceId === some.traceId && log.workspaceId === WS_2 && log.organisationId === ORG_A))
        expect(await analytics.hasTrace(orgA, 'trace-unknown')).toBe(false)
      })

      it('finds the current version of a feedback entry within its scope', async () => {
        const updated = currentFeedback(set.feedbackVersions).find((entry) => entry.id === 'fb-0000')!
        expect(updated.updatedAt).toBeGreaterThan(updated.createdAt)
        expect(await analytics.findFeedback(orgA, 'fb-0000')).toEqual(updated)
        const workspace = { organisationId: ORG_A, workspaceId: updated.workspaceId }
        expect(await analytics.findFeedback(workspace, 'fb-0000')).toEqual(updated)
        const other = { organisationId: ORG_A, workspaceId: updated.workspaceId === WS_1 ? WS_2 : WS_1 }
        expect(await analytics.findFeedback(other, 'fb-0000')).toBeNull()
        expect(await analytics.findFeedback({ organisationId: ORG_B, workspaceId: null }, 'fb-0000')).toBeNull()
        expect(await analytics.findFeedback(orgA, 'fb-other-org')).toBeNull()
      })
    })

    describe('scanLogs', () => {
      const filter: LogFilter = { scope: ws1, from: START, to: END }
      const ordered = new Expected(set, filter).ordered()

      it('returns every matching log once, oldest first, in batches', async () => {
        const seen: StoredLog[] = []
        const sizes: number[] = []
        await analytics.scanLogs(filter, { batchSize: 777, limit: 1_000_000 }, async (rows) => {
          sizes.push(rows.length)
          seen.push(...rows)
          return true
        })
        expect(seen.map((log) => log.id)).toEqual(ordered.map((log) => log.id))
        expect(sizes.slice(0, -1).every((size) => size === 777)).toBe(true)
        expect(seen.every((log) => log.organisationId === ORG_A && log.workspaceId === WS_1)).toBe(true)
      })

      it('stops at the limit and when the callback says so', async () => {
        const limited: string[] = []
        await analytics.scanLogs(filter, { batchSize: 100, limit: 250 }, async (rows) => {
          limited.push(...rows.map((log) => log.id))
          return true
        })
        expect(limited).toEqual(ordered.slice(0, 250).map((log) => log.id))
        let calls = 0
        await analytics.scanLogs(filter, { batchSize: 10, limit: 1000 }, async () => {
          calls += 1
          return false
        })
        expect(calls).toBe(1)
      })
    })

    describe('isolation', () => {
      it('a workspace scope never counts another workspace or organisation', async () => {
        for (const scope of [ws1, ws2]) {
          const rows = set.logs.filter((log) => log.organisationId === ORG_A && log.workspaceId === scope.workspaceId)
          const requests = await analytics.graph('requests', { scope, from: START, to: END })
          expect(requests.summary.total).toBe(rows.length)
          const users = await analytics.group({ name: 'users', page: 0, pageSize: 100 }, { scope, from: START, to: END })
          expect(users.rows.reduce((sum, row) => sum + (row.requests as number), 0)).toBe(rows.filter((log) => log.user !== null).length)
        }
        const b = await analytics.graph('requests', { scope: { organisationId: ORG_B, workspaceId: WS_1 }, from: START, to: END })
        expect(b.summary.total).toBe(0)
      })
    })

    describe('injection attempts are plain values', () => {
      const base = { scope: orgA, from: START, to: END }
      const stringFilters = (value: string): LogFilter[] => [
        { ...base, virtualKeys: [value] },
        { ...base, configs: [value] },
        { ...base, apiKeyIds: [value] },
        { ...base, providerModels: [{ provider: value, model: value }] },
        { ...base, models: [value] },
        { ...base, traceIds: [value] },
        { ...base, promptSlugs: [value] },
        { ...base, cacheStatuses: [value as 'hit'] },
        { ...base, metadata: { [value]: value } },
        { ...base, metadata: { env: value } },
        { scope: { organisationId: value, workspaceId: null }, from: START, to: END },
        { scope: { organisationId: ORG_A, workspaceId: value }, from: START, to: END },
      ]

      it.each(NASTY.map((value) => [value]))('%j matches nothing and breaks nothing', async (value) => {
        for (const filter of stringFilters(value)) {
          expect((await analytics.graph('requests', filter)).summary.total).toBe(0)
          expect((await analytics.graph('latency', filter)).summary).toEqual({ avg: 0, p50: 0, p90: 0, p99: 0 })
          expect((await analytics.graph('feedbacks/ai-models', filter)).dataPoints).toEqual([])
          expect((await analytics.graph('errors/status-codes', filter)).dataPoints).toEqual([])
          const users = await analytics.group({ name: 'users', page: 0, pageSize: 10 }, filter)
          expect(users).toEqual({ total: 0, rows: [] })
        }
        const metadataGroup = await analytics.group({ name: 'metadata', metadataKey: value, page: 0, pageSize: 10 }, base)
        expect(metadataGroup).toEqual({ total: 0, rows: [] })
        expect(await analytics.findLog(orgA, value)).toBeNull()
        expect(await analytics.hasTrace(orgA, value)).toBe(false)
        expect(await analytics.findFeedback(orgA, value)).toBeNull()
        expect(await harness.counts()).toEqual(before)
      })

      it('refuses numbers that are not finite instead of writing them into SQL', async () => {
        await expect(analytics.graph('requests', { ...base, costCents: { min: Number.NaN } })).rejects.toThrow(TypeError)
        await expect(analytics.graph('requests', { ...base, totalTokens: { max: Number.POSITIVE_INFINITY } })).rejects.toThrow(TypeError)
        const negative = await analytics.graph('requests', { ...base, totalTokens: { min: -1 } })
        expect(negative.summary.total).toBe(set.logs.filter((log) => log.organisationId === ORG_A && log.totalTokens !== null).length)
      })
    })
  })
}
