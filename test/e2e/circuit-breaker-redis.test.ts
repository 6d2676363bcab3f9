/**
 * Circuit breakers shared through Redis, end to end: a gateway started with `REDIS_URL` keeps its
 * config targets' circuits in Redis, and another instance sharing that Redis (here a second
 * `RedisCircuitBreaker`, as a second gateway's router would hold) opening or closing a circuit
 * changes what the gateway does: refused without a provider call while open, sent again once closed.
 * The circuit's key is found in Redis by the workspace's UUID, so the test does not depend on how
 * the router spells the rest of it.
 */
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest'
import { RedisCircuitBreaker } from '../../adapters/redis/redis-circuit-breaker.js'
import { AdminStore, CircuitBreaker } from '../../core/ports.js'
import { CHAT_BODY, startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { startMockUpstream, type MockUpstream } from '../helpers/mock-upstream.js'

const WAIT = { timeout: 10_000, interval: 20 }
const SETTING = { failureThreshold: 2, cooldownMs: 60_000 }

let upstream: MockUpstream
let gw: TestGateway
let other: RedisCircuitBreaker
let admin: Redis
let key: string
let workspaceUuid: string

beforeAll(async () => {
  upstream = await startMockUpstream()
  gw = await startTestGateway({ env: { REDIS_URL: inject('redisUrl') } })
  other = new RedisCircuitBreaker({ url: inject('redisUrl') })
  await other.start()
  admin = new Redis(inject('redisUrl'))
  const made = await gw.workspaceKey(['completions.write'])
  key = made.key
  const organisation = (await gw.admin('GET', '/v1/admin/organisation')).body
  workspaceUuid = (await gw.wiring.resolve(AdminStore).findWorkspace(organisation.id, made.workspaceId))?.id as string
})

afterAll(async () => {
  await other?.close()
  admin?.disconnect()
  await gw?.close()
  await upstream?.close()
})

const CONFIG = {
  strategy: { mode: 'single', cb_config: { failure_threshold: SETTING.failureThreshold, cooldown_interval: SETTING.cooldownMs } },
  targets: [{ provider: 'openai', api_key: 'sk-test', custom_host: '' }],
}

function post(): Promise<Response> {
  const config = { ...CONFIG, targets: [{ ...CONFIG.targets[0], custom_host: upstream.url }] }
  return fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-gateway-api-key': key, 'x-gateway-config': JSON.stringify(config) },
    body: JSON.stringify(CHAT_BODY),
  })
}

/** The Redis keys of this workspace's circuits. */
async function circuitKeys(): Promise<string[]> {
  const found: string[] = []
  let cursor = '0'
  do {
    const [next, keys] = await admin.scan(cursor, 'MATCH', `gateway:cb:${workspaceUuid}:*`, 'COUNT', 1000)
    cursor = next
    found.push(...keys)
  } while (cursor !== '0')
  return found
}

describe('circuit breakers with REDIS_URL', () => {
  it('are opened and closed for the gateway by another instance sharing Redis', async () => {
    const breaker = gw.wiring.resolve(CircuitBreaker)
    expect(breaker).toBeInstanceOf(RedisCircuitBreaker)

    // One failure through the gateway: counted in Redis under the target's circuit.
    upstream.on('/v1/chat/completions', { type: 'json', status: 500, body: { error: { message: 'boom', type: 'server_error' } } })
    expect((await post()).status).toBe(500)
    await vi.waitFor(async () => expect(await circuitKeys()).toHaveLength(1), WAIT)
    const [redisKey] = await circuitKeys()
    const circuit = (redisKey as string).slice('gateway:cb:'.length)
    expect(await admin.hget(redisKey as string, 'f')).toBe('1')

    // The second failure, seen by the other instance, opens the circuit for the gateway too.
    const openedAt = Date.now()
    other.record(circuit, SETTING, false, openedAt)
    await other.settled()
    await vi.waitFor(() => expect((breaker as RedisCircuitBreaker).peek(circuit)?.openUntil).toBe(openedAt + SETTING.cooldownMs), WAIT)
    const calls = upstream.requests.length
    const refused = await post()
    expect(refused.status).toBe(503)
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('GW_CIRCUIT_OPEN')
    expect(upstream.requests).toHaveLength(calls)

    // The other instance's probe succeeds after the cool-down: closed everywhere, traffic flows.
    upstream.reset()
    const probeAt = openedAt + SETTING.cooldownMs
    expect(await other.allow(circuit, SETTING, probeAt)).toBe(true)
    other.record(circuit, SETTING, true, probeAt)
    await other.settled()
    await vi.waitFor(() => expect((breaker as RedisCircuitBreaker).peek(circuit)).toBeUndefined(), WAIT)
    expect((await post()).status).toBe(200)
    expect(upstream.requests).toHaveLength(1)
    expect(await admin.exists(redisKey as string)).toBe(0)
  })
})
