import { describe, expect, it } from 'vitest'
import { attemptsJson, checkLogRecord } from '../../../adapters/log-sink/log-records.js'
import { parseAttempts } from '../../../adapters/sql/analytics-sql.js'
import { MAX_LOG_ATTEMPTS, type LogAttempt, type LogRecord } from '../../../core/logs.js'
import { fullLogRecord, logRecord } from '../../helpers/log-records.js'

const attempt = (overrides: Partial<LogAttempt> = {}): LogAttempt => ({
  target: 'config.targets[0]', provider: 'openai', virtual_key: null, status: 200, latency_ms: 1.5, retry: 0, error_code: null, cache_status: null, ...overrides,
})

describe('checkLogRecord: config fields', () => {
  it('keeps a config-routed record as it is', () => {
    const full = fullLogRecord()
    expect(checkLogRecord(full)).toEqual(full)
  })

  it('reads a journaled record of a version without config fields as a record without a config', () => {
    const { configVersion: _version, attempts: _attempts, ...older } = logRecord({ config: null })
    const checked = checkLogRecord(older as LogRecord)
    expect(checked.configVersion).toBeNull()
    expect(checked.attempts).toBeNull()
  })

  it('bounds the attempts to MAX_LOG_ATTEMPTS, keeping the first ones and the last', () => {
    const many = Array.from({ length: 50 }, (_, index) => attempt({ target: `config.targets[${index}]` }))
    const checked = checkLogRecord(logRecord({ attempts: many }))
    expect(checked.attempts).toHaveLength(MAX_LOG_ATTEMPTS)
    expect(checked.attempts?.slice(0, MAX_LOG_ATTEMPTS - 1)).toEqual(many.slice(0, MAX_LOG_ATTEMPTS - 1))
    expect(checked.attempts?.at(-1)).toEqual(many[49])
  })

  it('turns fields a store cannot hold into their empty values, and a list of nothing into null', () => {
    const odd = { target: 7, provider: 1, virtual_key: ['x'], status: 70_000, latency_ms: Number.NaN, retry: -1, error_code: {}, cache_status: 'HIT', extra: 'dropped' }
    const checked = checkLogRecord(logRecord({ attempts: [odd as unknown as LogAttempt, null as unknown as LogAttempt], configVersion: -3 }))
    expect(checked.attempts).toEqual([{ target: '', provider: null, virtual_key: null, status: 0, latency_ms: null, retry: 0, error_code: null, cache_status: null }])
    expect(checked.configVersion).toBeNull()
    expect(checkLogRecord(logRecord({ attempts: [] })).attempts).toBeNull()
    expect(checkLogRecord(logRecord({ attempts: 'no' as unknown as LogAttempt[] })).attempts).toBeNull()
  })

  it('keeps the refresh cache status', () => {
    expect(checkLogRecord(logRecord({ cacheStatus: 'refresh' })).cacheStatus).toBe('refresh')
    expect(checkLogRecord(logRecord({ cacheStatus: 'REFRESH' as 'refresh' })).cacheStatus).toBe('disabled')
  })

  it('stores attempts as JSON text that reads back the same', () => {
    const list = [attempt({ provider: "o'brien \\ \"x\" 😀" }), attempt({ status: 0, latency_ms: null, error_code: 'GW_UPSTREAM_TIMEOUT' })]
    expect(parseAttempts(attemptsJson(list))).toEqual(list)
    expect(attemptsJson(null)).toBeNull()
    expect(parseAttempts(null)).toBeNull()
    expect(parseAttempts('{"not":"a list"}')).toBeNull()
    expect(parseAttempts('not json')).toBeNull()
  })
})
