/**
 * Log filter parsing (plugins/admin-api/log-filters.ts) and the feedback, custom log and export
 * body schemas: valid input becomes a `LogFilter`; every malformed or hostile value is a 400 that
 * names its field, and nothing unvalidated reaches the filter.
 */
import { describe, expect, it } from 'vitest'
import type { GatewayError } from '../../../core/errors.js'
import type { StoredLog } from '../../../core/logs.js'
import { createFeedbackBody, updateFeedbackBody } from '../../../plugins/admin-api/feedback.js'
import { createExportBody, exportRow } from '../../../plugins/admin-api/log-exports.js'
import {
  analyticsGroupQuery,
  analyticsQuery,
  exportFilterFields,
  exportFilterValues,
  parseFilterInput,
  queryParameters,
  toLogFilter,
  type FilterInput,
} from '../../../plugins/admin-api/log-filters.js'
import { createLogsBody } from '../../../plugins/admin-api/logs.js'

const RANGE = 'time_of_generation_min=2026-01-01T00:00:00Z&time_of_generation_max=2026-01-31T00:00:00%2B05:30'
const SCOPE = { organisationId: 'org-1', workspaceId: 'ws-uuid' }

/** The query → the filter, or the error message. */
function parse(query: string, schema: typeof analyticsQuery | typeof analyticsGroupQuery = analyticsQuery): { filter?: ReturnType<typeof toLogFilter>; error?: GatewayError } {
  const values = queryParameters(query, schema)
  if (!values.ok) return { error: values.error }
  const parsed = parseFilterInput(values.value, schema)
  if (!parsed.ok) return { error: parsed.error }
  return { filter: toLogFilter(parsed.value as FilterInput, SCOPE) }
}

function rejects(query: string, field: string): string {
  const result = parse(query)
  expect(result.error, query).toBeDefined()
  expect(result.error?.status).toBe(400)
  expect(result.error?.adminCode).toBe('AB01')
  expect(result.error?.message.startsWith(`${field}`), `${query} → ${result.error?.message}`).toBe(true)
  return result.error?.message ?? ''
}

describe('analytics query → LogFilter', () => {
  it('parses the time range (with offsets) and every list, range and metadata filter', () => {
    const query = [
      RANGE,
      'status_code=200,429',
      'virtual_keys=main-258f4d,other-1a2b3c',
      'configs=pc-a',
      'api_key_ids=0F8FAD5B-D9CB-469F-A165-70867728950E',
      'ai_org_model=openai__gpt-4o,azure-openai__gpt-35-turbo',
      'ai_model=gpt-4o',
      'trace_id=trace-1,trace:2',
      'prompt_slug=pp-x',
      'cache_status=HIT,semantic%20hit',
      `metadata=${encodeURIComponent('{"_user":"u1","env":"prod"}')}`,
      'cost_min=0.5&cost_max=100',
      'total_units_min=1&total_units_max=1000',
      'prompt_token_min=1&completion_token_max=9',
      'weighted_feedback_min=-2.5&weighted_feedback_max=10',
    ].join('&')
    const { filter, error } = parse(query)
    expect(error).toBeUndefined()
    expect(filter).toEqual({
      scope: SCOPE,
      from: Date.parse('2026-01-01T00:00:00Z'),
      to: Date.parse('2026-01-31T00:00:00+05:30'),
      statusCodes: [200, 429],
      virtualKeys: ['main-258f4d', 'other-1a2b3c'],
      configs: ['pc-a'],
      apiKeyIds: ['0f8fad5b-d9cb-469f-a165-70867728950e'],
      providerModels: [
        { provider: 'openai', model: 'gpt-4o' },
        { provider: 'azure-openai', model: 'gpt-35-turbo' },
      ],
      models: ['gpt-4o'],
      traceIds: ['trace-1', 'trace:2'],
      promptSlugs: ['pp-x'],
      cacheStatuses: ['hit', 'semantic_hit'],
      metadata: { _user: 'u1', env: 'prod' },
      costCents: { min: 0.5, max: 100 },
      totalTokens: { min: 1, max: 1000 },
      promptTokens: { min: 1 },
      completionTokens: { max: 9 },
      weightedFeedback: { min: -2.5, max: 10 },
    })
  })

  it('needs both ends of the time range, with an offset, in order, at most 366 days apart', () => {
    rejects('time_of_generation_max=2026-01-01T00:00:00Z', 'time_of_generation_min')
    rejects('time_of_generation_min=2026-01-01T00:00:00Z', 'time_of_generation_max')
    rejects('time_of_generation_min=2026-01-01&time_of_generation_max=2026-01-02T00:00:00Z', 'time_of_generation_min')
    rejects('time_of_generation_min=2026-01-01T00:00:00&time_of_generation_max=2026-01-02T00:00:00Z', 'time_of_generation_min')
    expect(rejects('time_of_generation_min=2026-02-01T00:00:00Z&time_of_generation_max=2026-01-01T00:00:00Z', 'time_of_generation_max')).toContain('before')
    expect(rejects('time_of_generation_min=2024-01-01T00:00:00Z&time_of_generation_max=2026-01-01T00:00:00Z', 'time_of_generation_max')).toContain('366 days')
    expect(parse('time_of_generation_min=2025-01-01T00:00:00Z&time_of_generation_max=2026-01-01T00:00:00Z').error).toBeUndefined()
  })

  it('refuses unknown, repeated and unsupported parameters, naming them', () => {
    expect(rejects(`${RANGE}&status=200`, 'status')).toContain('unknown query parameter')
    expect(rejects(`${RANGE}&status_code=200&status_code=500`, 'status_code')).toContain('more than once')
    expect(rejects(`${RANGE}&span_id=abc`, 'span_id')).toContain('not supported')
    // Paging belongs to groups only.
    rejects(`${RANGE}&page_size=10`, 'page_size')
    expect(parse(`${RANGE}&page_size=10&current_page=2`, analyticsGroupQuery).error).toBeUndefined()
    // A hostile parameter name is echoed bounded and without control characters.
    const message = rejects(`${RANGE}&${encodeURIComponent('x\n'.repeat(100))}=1`, 'x?')
    expect(message.length).toBeLessThan(120)
    expect(message).not.toContain('\n')
  })

  it('checks each element of comma lists and caps their length', () => {
    rejects(`${RANGE}&status_code=200,abc`, 'status_code.1')
    rejects(`${RANGE}&status_code=99`, 'status_code.0')
    rejects(`${RANGE}&status_code=600`, 'status_code.0')
    rejects(`${RANGE}&status_code=200,`, 'status_code.1')
    rejects(`${RANGE}&api_key_ids=not-a-uuid`, 'api_key_ids.0')
    rejects(`${RANGE}&ai_org_model=gpt-4o`, 'ai_org_model.0')
    rejects(`${RANGE}&ai_org_model=OpenAI__gpt-4o`, 'ai_org_model.0')
    rejects(`${RANGE}&cache_status=maybe`, 'cache_status.0')
    expect(rejects(`${RANGE}&status_code=${Array(101).fill('200').join(',')}`, 'status_code')).toContain('at most 100')
  })

  it('refuses injection attempts in every string filter', () => {
    const hostile = ["x' OR '1'='1", 'a;DROP TABLE request_logs', 'a"b', 'a\\b', 'a b', '../../etc/passwd', 'a\u0000b', '$(id)', 'a)--']
    for (const value of hostile) {
      const encoded = encodeURIComponent(value)
      rejects(`${RANGE}&virtual_keys=${encoded}`, 'virtual_keys.0')
      rejects(`${RANGE}&configs=${encoded}`, 'configs.0')
      rejects(`${RANGE}&prompt_slug=${encoded}`, 'prompt_slug.0')
      rejects(`${RANGE}&workspace_slug=${encoded}`, 'workspace_slug')
      rejects(`${RANGE}&ai_model=${encoded}`, 'ai_model.0')
      rejects(`${RANGE}&ai_org_model=openai__${encoded}`, 'ai_org_model.0')
      rejects(`${RANGE}&api_key_ids=${encoded}`, 'api_key_ids.0')
    }
    // Trace ids are free-form client strings: printable ASCII passes (the adapters quote it), controls and spaces do not.
    rejects(`${RANGE}&trace_id=${encodeURIComponent('a b')}`, 'trace_id.0')
    rejects(`${RANGE}&trace_id=${encodeURIComponent('a\nb')}`, 'trace_id.0')
    rejects(`${RANGE}&trace_id=${'t'.repeat(129)}`, 'trace_id.0')
    expect(parse(`${RANGE}&trace_id=${encodeURIComponent("x'--")}`).filter?.traceIds).toEqual(["x'--"])
  })

  it('takes metadata only as a JSON object of bounded strings with safe keys', () => {
    const meta = (value: string): string => `${RANGE}&metadata=${encodeURIComponent(value)}`
    rejects(meta('not json'), 'metadata')
    rejects(meta('[1,2]'), 'metadata')
    rejects(meta('"text"'), 'metadata')
    rejects(meta('{"a":1}'), 'metadata.a')
    rejects(meta('{"a":{"$ne":null}}'), 'metadata.a')
    rejects(meta(`{"a' OR 1=1 --":"x"}`), 'metadata')
    rejects(meta(`{"a":"${'v'.repeat(1025)}"}`), 'metadata.a')
    rejects(meta('{"a":"line\\nbreak"}'), 'metadata.a')
    rejects(meta(JSON.stringify(Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`k${i}`, 'v'])))), 'metadata')
    rejects(meta('{"__proto__":"x","a":"b"}'), 'metadata')
    expect(parse(meta('{"_user":"u1","team.name":"a/b"}')).filter?.metadata).toEqual({ _user: 'u1', 'team.name': 'a/b' })
  })

  it('checks numeric ranges: numbers only, bounded, min ≤ max', () => {
    rejects(`${RANGE}&cost_min=abc`, 'cost_min')
    rejects(`${RANGE}&cost_min=-1`, 'cost_min')
    rejects(`${RANGE}&cost_min=1e3`, 'cost_min')
    rejects(`${RANGE}&cost_min=Infinity`, 'cost_min')
    rejects(`${RANGE}&total_units_min=1.5`, 'total_units_min')
    rejects(`${RANGE}&weighted_feedback_max=11`, 'weighted_feedback_max')
    expect(rejects(`${RANGE}&cost_min=5&cost_max=1`, 'cost_max')).toContain('cost_min')
  })

  it('treats empty values as absent', () => {
    expect(parse(`${RANGE}&status_code=&workspace_slug=`).filter).toEqual({ scope: SCOPE, from: Date.parse('2026-01-01T00:00:00Z'), to: Date.parse('2026-01-31T00:00:00+05:30') })
  })
})

describe('export filters (JSON)', () => {
  function exportFilter(filters: Record<string, unknown>): { ok: boolean; message?: string } {
    const values = exportFilterValues(filters)
    if (!values.ok) return { ok: false, message: values.error.message }
    const parsed = parseFilterInput(values.value, exportFilterFields, 'filters.')
    return parsed.ok ? { ok: true } : { ok: false, message: parsed.error.message }
  }
  const range = { time_of_generation_min: '2026-01-01T00:00:00Z', time_of_generation_max: '2026-01-02T00:00:00Z' }

  it('accepts lists as arrays or comma strings, numbers and a metadata object', () => {
    expect(exportFilter({ ...range, status_code: [200, 500], virtual_keys: 'a-1,b-2', cost_max: 10, metadata: { env: 'prod' }, page_size: 100 })).toEqual({ ok: true })
  })

  it('names the field of every bad filter', () => {
    expect(exportFilter({ ...range, bogus: 1 }).message).toMatch(/^filters\.bogus: unknown filter/)
    expect(exportFilter({ ...range, status_code: [{ a: 1 }] }).message).toMatch(/^filters\.status_code:/)
    expect(exportFilter({ ...range, virtual_keys: ['a,b'] }).message).toMatch(/^filters\.virtual_keys:/)
    expect(exportFilter({ ...range, page_size: 50_001 }).message).toMatch(/^filters\.page_size:/)
    expect(exportFilter({ time_of_generation_min: range.time_of_generation_min }).message).toMatch(/^filters\.time_of_generation_max:/)
    expect(exportFilter({ ...range, metadata: { a: 1 } }).message).toMatch(/^filters\.metadata\.a:/)
  })

  it('validates the export body: requested_data from the whitelist, no repeats, no unknown fields', () => {
    expect(createExportBody.safeParse({ filters: range, requested_data: ['id', 'cost'] }).success).toBe(true)
    expect(createExportBody.safeParse({ filters: range, requested_data: ['id', 'password'] }).success).toBe(false)
    expect(createExportBody.safeParse({ filters: range, requested_data: ['id', 'id'] }).success).toBe(false)
    expect(createExportBody.safeParse({ filters: range, requested_data: [] }).success).toBe(false)
    expect(createExportBody.safeParse({ filters: range, requested_data: ['id'], extra: 1 }).success).toBe(false)
  })

  it('writes only the requested fields of a log', () => {
    const log = { id: 'r1', traceId: 't1', createdAt: 0, costNanoUsd: 25_000_000, requestBody: '{"api_key":"sk-secret","model":"m"}', status: 200, outcome: 'completed' } as unknown as StoredLog
    expect(exportRow(log, ['id', 'cost'])).toEqual({ id: 'r1', cost: 2.5 })
    expect(Object.keys(exportRow(log, ['trace_id', 'is_success']))).toEqual(['trace_id', 'is_success'])
    expect(JSON.stringify(exportRow(log, ['request']))).not.toContain('sk-secret')
  })
})

describe('feedback and custom log bodies', () => {
  it('feedback: trace_id required, value an integer −10..10, weight 0..1 (default 1), metadata of strings', () => {
    expect(createFeedbackBody.parse({ trace_id: 't', value: 3 })).toEqual({ trace_id: 't', value: 3, weight: 1 })
    expect(createFeedbackBody.safeParse([{ trace_id: 't', value: 1 }, { trace_id: 'u', value: -10, weight: 0.5 }]).success).toBe(true)
    for (const bad of [
      { value: 1 },
      { trace_id: 't', value: 11 },
      { trace_id: 't', value: 1.5 },
      { trace_id: 't', value: '5' },
      { trace_id: 't', value: 1, weight: 2 },
      { trace_id: 't', value: 1, metadata: { a: 1 } },
      { trace_id: 't', value: 1, other: true },
      { trace_id: 'a b', value: 1 },
      [],
      Array.from({ length: 101 }, () => ({ trace_id: 't', value: 1 })),
    ]) {
      expect(createFeedbackBody.safeParse(bad).success, JSON.stringify(bad).slice(0, 80)).toBe(false)
    }
    expect(updateFeedbackBody.safeParse({ weight: 0.5 }).success).toBe(false)
    expect(updateFeedbackBody.safeParse({ value: -3 }).success).toBe(true)
  })

  it('custom logs: request.url (http/https) and both bodies required; bounded metadata', () => {
    const log = { request: { url: 'https://api.openai.com/v1/chat/completions', body: { model: 'gpt-4o' } }, response: { body: { id: 'x' } } }
    expect(createLogsBody.safeParse(log).success).toBe(true)
    expect(createLogsBody.safeParse([log, log]).success).toBe(true)
    expect(createLogsBody.safeParse({ ...log, request: { url: 'file:///etc/passwd', body: {} } }).success).toBe(false)
    expect(createLogsBody.safeParse({ ...log, request: { url: 'https://x.test' } }).success).toBe(false)
    expect(createLogsBody.safeParse({ ...log, response: { status: 700, body: {} } }).success).toBe(false)
    expect(createLogsBody.safeParse({ ...log, metadata: { trace_id: 'a b' } }).success).toBe(false)
    expect(createLogsBody.safeParse({ ...log, request: { ...log.request, method: 'GET /x' } }).success).toBe(false)
  })
})
