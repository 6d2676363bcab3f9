import { randomBytes } from 'node:crypto'
import { createClient } from '@clickhouse/client'
import { inject } from 'vitest'
import { ClickHouseLogAnalytics } from '../../adapters/clickhouse/clickhouse-log-analytics.js'
import type { FeedbackRecord, LogRecord } from '../../core/logs.js'
import { logAnalyticsContract } from './log-analytics.contract.js'

function logRow(log: LogRecord): Record<string, unknown> {
  const metadata = Object.entries(log.metadata ?? {})
  return {
    organisation_id: log.organisationId ?? '', workspace_id: log.workspaceId ?? '',
    created_at: Math.floor(log.createdAt / 1000), created_at_ms: log.createdAt,
    id: log.id, trace_id: log.traceId, source: log.source, api_key_id: log.apiKeyId, end_user: log.user,
    virtual_key: log.virtualKey, config: log.config, prompt_slug: log.promptSlug, prompt_version: log.promptVersion,
    method: log.method, route: log.route, path: log.path, provider: log.provider, model: log.model, status: log.status,
    outcome: log.outcome, streaming: log.streaming ? 1 : 0, latency_ms: log.latencyMs, ttft_ms: log.ttftMs,
    prompt_tokens: log.promptTokens, completion_tokens: log.completionTokens, total_tokens: log.totalTokens,
    cached_tokens: log.cachedTokens, cost_nano_usd: log.costNanoUsd, cache_status: log.cacheStatus,
    retry_count: log.retryCount, fallback_index: log.fallbackIndex, error_code: log.errorCode, error_type: log.errorType,
    metadata_keys: metadata.map(([key]) => key), metadata_values: metadata.map(([, value]) => value),
    request_body: log.requestBody, response_body: log.responseBody,
    config_version: log.configVersion, attempts: log.attempts === null ? null : JSON.stringify(log.attempts),
  }
}

function feedbackRow(entry: FeedbackRecord): Record<string, unknown> {
  const metadata = Object.entries(entry.metadata ?? {})
  return {
    organisation_id: entry.organisationId, workspace_id: entry.workspaceId ?? '', id: entry.id, trace_id: entry.traceId,
    value: entry.value, weight: entry.weight, metadata_keys: metadata.map(([key]) => key), metadata_values: metadata.map(([, value]) => value),
    created_at: Math.floor(entry.createdAt / 1000), created_at_ms: entry.createdAt, updated_at_ms: entry.updatedAt,
  }
}

logAnalyticsContract('ClickHouse', async () => {
  const url = inject('clickhouseUrl')
  const database = `analytics_${randomBytes(6).toString('hex')}`
  const client = createClient({ url })
  const analytics = new ClickHouseLogAnalytics({ url, database })
  await analytics.start()
  const count = async (table: string): Promise<number> => {
    const result = await client.query({ query: `SELECT count() AS n FROM ${database}.${table}`, format: 'JSONEachRow' })
    return Number((await result.json<{ n: string }>())[0]?.n)
  }
  return {
    analytics,
    async insert(set) {
      await client.insert({ table: `${database}.request_logs`, values: set.logs.map(logRow), format: 'JSONEachRow' })
      // One insert per version, like separate PUTs: the versions stay separate rows until a merge.
      const first = set.feedbackVersions.filter((entry) => entry.updatedAt === entry.createdAt)
      const later = set.feedbackVersions.filter((entry) => entry.updatedAt !== entry.createdAt)
      await client.insert({ table: `${database}.feedback`, values: first.map(feedbackRow), format: 'JSONEachRow' })
      await client.insert({ table: `${database}.feedback`, values: later.map(feedbackRow), format: 'JSONEachRow' })
    },
    async counts() {
      return { logs: await count('request_logs'), feedback: await count('feedback') }
    },
    async close() {
      await analytics.close()
      await client.command({ query: `DROP DATABASE IF EXISTS ${database}` })
      await client.close()
    },
  }
})
