/** Log and feedback records for log sink tests. */
import { randomUUID } from 'node:crypto'
import type { FeedbackRecord, LogRecord } from '../../core/logs.js'

/** A minimal valid record with a fresh id; `overrides` replace fields. */
export function logRecord(overrides: Partial<LogRecord> = {}): LogRecord {
  const id = randomUUID()
  return {
    id,
    traceId: id,
    source: 'gateway',
    createdAt: 1_717_171_717_171,
    organisationId: null,
    workspaceId: null,
    apiKeyId: null,
    user: null,
    virtualKey: null,
    config: null,
    configVersion: null,
    promptSlug: null,
    promptVersion: null,
    method: 'POST',
    route: 'chat.completions',
    path: '/v1/chat/completions',
    provider: null,
    model: null,
    status: 200,
    outcome: 'completed',
    streaming: false,
    latencyMs: 12,
    ttftMs: null,
    promptTokens: null,
    completionTokens: null,
    totalTokens: null,
    cachedTokens: null,
    costNanoUsd: null,
    cacheStatus: 'disabled',
    retryCount: 0,
    fallbackIndex: null,
    errorCode: null,
    errorType: null,
    metadata: null,
    requestBody: null,
    responseBody: null,
    attempts: null,
    ...overrides,
  }
}

/** A record with every field set. */
export function fullLogRecord(overrides: Partial<LogRecord> = {}): LogRecord {
  return logRecord({
    traceId: 'trace-from-client-123',
    source: 'custom',
    createdAt: 1_700_000_000_123,
    organisationId: randomUUID(),
    workspaceId: randomUUID(),
    apiKeyId: randomUUID(),
    user: 'user-42',
    virtualKey: 'openai-prod',
    config: 'cfg-1',
    configVersion: 4,
    promptSlug: 'welcome',
    promptVersion: 3,
    method: 'PUT',
    route: 'passthrough',
    path: '/v1/files/abc?x=1',
    provider: 'openai',
    model: 'gpt-4o-mini',
    status: 429,
    outcome: 'errored',
    streaming: true,
    latencyMs: 1234.5678,
    ttftMs: 98.765,
    promptTokens: 11,
    completionTokens: 22,
    totalTokens: 33,
    cachedTokens: 4,
    costNanoUsd: 9_007_199_254_740,
    cacheStatus: 'miss',
    retryCount: 2,
    fallbackIndex: 1,
    errorCode: 'GW_UPSTREAM_TIMEOUT',
    errorType: 'timeout_error',
    metadata: { _user: 'user-42', team: 'naïve "quotes", commas \\ slashes', empty: '' },
    requestBody: '{"model":"gpt-4o-mini"}',
    responseBody: '{"error":{}}',
    attempts: [
      { target: 'config.targets[0]', provider: 'anthropic', virtual_key: 'anthropic-prod', status: 0, latency_ms: 30000.25, retry: 0, error_code: 'GW_UPSTREAM_TIMEOUT', cache_status: null },
      { target: 'config.targets[1]', provider: 'openai', virtual_key: null, status: 412, latency_ms: 0.5, retry: 0, error_code: 'GW_BUDGET_EXHAUSTED', cache_status: 'refresh' },
      { target: 'config.targets[1]', provider: 'openai', virtual_key: 'openai-prod', status: 429, latency_ms: 12.75, retry: 1, error_code: null, cache_status: 'miss' },
    ],
    ...overrides,
  })
}

export function feedbackRecord(overrides: Partial<FeedbackRecord> = {}): FeedbackRecord {
  return {
    id: randomUUID(),
    traceId: randomUUID(),
    organisationId: randomUUID(),
    workspaceId: randomUUID(),
    value: 5,
    weight: 0.5,
    metadata: { reviewer: 'bob' },
    createdAt: 1_717_171_717_000,
    updatedAt: 1_717_171_717_000,
    ...overrides,
  }
}
