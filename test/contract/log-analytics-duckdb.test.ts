import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { DuckDbDatabase } from '../../adapters/embedded/duckdb-database.js'
import { DuckDbLogAnalytics } from '../../adapters/embedded/duckdb-log-analytics.js'
import { FEEDBACK_COLUMNS, REQUEST_LOG_COLUMNS } from '../../adapters/embedded/duckdb-schema.js'
import type { FeedbackRecord, LogRecord } from '../../core/logs.js'
import { logAnalyticsContract } from './log-analytics.contract.js'

/** 'YYYY-MM-DD hh:mm:ss.mmm' (UTC), what read_json parses into a TIMESTAMP. */
const timestamp = (ms: number): string => new Date(ms).toISOString().replace('T', ' ').replace('Z', '')

function logLine(log: LogRecord): Record<string, unknown> {
  const metadata = Object.entries(log.metadata ?? {})
  return {
    id: log.id, trace_id: log.traceId, source: log.source, created_at: timestamp(log.createdAt),
    organisation_id: log.organisationId, workspace_id: log.workspaceId, api_key_id: log.apiKeyId, end_user: log.user,
    virtual_key: log.virtualKey, config: log.config, prompt_slug: log.promptSlug, prompt_version: log.promptVersion,
    method: log.method, route: log.route, path: log.path, provider: log.provider, model: log.model, status: log.status,
    outcome: log.outcome, streaming: log.streaming, latency_ms: log.latencyMs, ttft_ms: log.ttftMs,
    prompt_tokens: log.promptTokens, completion_tokens: log.completionTokens, total_tokens: log.totalTokens,
    cached_tokens: log.cachedTokens, cost_nano_usd: log.costNanoUsd, cache_status: log.cacheStatus,
    retry_count: log.retryCount, fallback_index: log.fallbackIndex, error_code: log.errorCode, error_type: log.errorType,
    metadata_keys: metadata.map(([key]) => key), metadata_values: metadata.map(([, value]) => value),
    request_body: log.requestBody, response_body: log.responseBody,
    config_version: log.configVersion, attempts: log.attempts === null ? null : JSON.stringify(log.attempts),
  }
}

function feedbackLine(entry: FeedbackRecord): Record<string, unknown> {
  const metadata = Object.entries(entry.metadata ?? {})
  return {
    id: entry.id, trace_id: entry.traceId, organisation_id: entry.organisationId, workspace_id: entry.workspaceId,
    value: entry.value, weight: entry.weight, metadata_keys: metadata.map(([key]) => key), metadata_values: metadata.map(([, value]) => value),
    created_at: timestamp(entry.createdAt), updated_at: timestamp(entry.updatedAt),
  }
}

/** `columns = {...}` of read_json, from the schema's column list (test-only constants). */
function columnSpec(columns: ReadonlyArray<readonly [string, string]>): string {
  return `{${columns.map(([name, type]) => `'${name}': '${type.replace(' NOT NULL', '')}'`).join(', ')}}`
}

logAnalyticsContract('DuckDB', async () => {
  const directory = await mkdtemp(join(tmpdir(), 'log-analytics-'))
  const database = new DuckDbDatabase({ path: ':memory:' })
  const analytics = new DuckDbLogAnalytics(database)
  await analytics.start()
  const session = await database.openSession()
  const load = async (table: string, lines: readonly Record<string, unknown>[], columns: ReadonlyArray<readonly [string, string]>): Promise<void> => {
    const file = join(directory, `${table}.jsonl`)
    await writeFile(file, lines.map((line) => JSON.stringify(line)).join('\n'))
    await session.run(`INSERT INTO ${table} SELECT * FROM read_json('${file}', format = 'newline_delimited', columns = ${columnSpec(columns)})`)
  }
  const count = async (table: string): Promise<number> => Number((await session.query(`SELECT count(*) AS n FROM ${table}`))[0]?.n)
  return {
    analytics,
    async insert(set) {
      await load('request_logs', set.logs.map(logLine), REQUEST_LOG_COLUMNS)
      await load('feedback', set.feedbackVersions.map(feedbackLine), FEEDBACK_COLUMNS)
    },
    async counts() {
      return { logs: await count('request_logs'), feedback: await count('feedback') }
    },
    async close() {
      await session.close()
      await analytics.close()
      await database.close()
      await rm(directory, { recursive: true, force: true })
    },
  }
})
