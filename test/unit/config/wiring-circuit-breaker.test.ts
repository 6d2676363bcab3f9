/**
 * The composition root picks the circuit breaker store as the other shared counters: Redis when
 * `REDIS_URL` is set, in process otherwise, registered for forward (its router checks and charges
 * circuits per attempt). Wired only: nothing is started or connected.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { InProcessCircuitBreaker } from '../../../adapters/memory/in-process-circuit-breaker.js'
import { RedisCircuitBreaker } from '../../../adapters/redis/redis-circuit-breaker.js'
import { loadConfig } from '../../../config/load.js'
import { wire } from '../../../config/wiring.js'
import { CircuitBreaker } from '../../../core/ports.js'

const dataDir = mkdtempSync(join(tmpdir(), 'gw-wiring-breaker-'))
afterAll(() => rmSync(dataDir, { recursive: true, force: true }))

describe('wire: circuit breaker', () => {
  it('uses the in-process breaker without REDIS_URL', async () => {
    const wiring = await wire(loadConfig({ GATEWAY_DATA_DIR: dataDir, GATEWAY_LOG_LEVEL: 'silent' }))
    expect(wiring.resolve(CircuitBreaker)).toBeInstanceOf(InProcessCircuitBreaker)
    expect(wiring.services.map((entry) => entry.name)).toContain('in-process-circuit-breaker')
  })

  it('uses the Redis breaker with REDIS_URL, as a service started at boot', async () => {
    const wiring = await wire(loadConfig({ GATEWAY_DATA_DIR: dataDir, GATEWAY_LOG_LEVEL: 'silent', REDIS_URL: 'redis://127.0.0.1:1' }))
    const breaker = wiring.resolve(CircuitBreaker)
    expect(breaker).toBeInstanceOf(RedisCircuitBreaker)
    expect(wiring.services.find((entry) => entry.name === 'redis-circuit-breaker')?.service).toBe(breaker)
    await breaker.close()
  })
})
