/**
 * Circuit breakers against hostile circuit keys. A key carries tenant-chosen parts (a config's
 * target path, a slug), so it may hold the separators of the Redis adapter's pub/sub messages
 * (`<state>|<openUntil>|<key>`), glob or hash-tag characters, newlines, or be long; and a tenant may
 * make many failing circuits. None of that may open, close or reach another circuit, on this
 * instance or on another one sharing Redis, nor let memory grow without bound.
 */
import { randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest'
import { InProcessCircuitBreaker } from '../../adapters/memory/in-process-circuit-breaker.js'
import { RedisCircuitBreaker } from '../../adapters/redis/redis-circuit-breaker.js'
import type { CircuitBreaker, CircuitSetting } from '../../core/ports.js'

const T0 = 1_800_000_000_000
const ONE: CircuitSetting = { failureThreshold: 1, cooldownMs: 60_000 }
const WAIT = { timeout: 10_000, interval: 10 }

/** Keys an attacker could shape to look like another circuit, or like a message. */
function hostileKeys(victim: string): string[] {
  return [
    `x|0|${victim}`,
    `closed|0|${victim}`,
    `open|${T0}|${victim}`,
    `${victim}|`,
    `|${victim}`,
    `${victim}\n`,
    `${victim}*`,
    `${victim}?`,
    `{${victim}}`,
    `${victim}\u0000`,
    `${victim} `,
    victim.toUpperCase(),
    `${victim}${'é'.repeat(2_000)}`,
  ]
}

describe('in-process breaker: hostile keys', () => {
  it('opens only the circuit named exactly', () => {
    const cb = new InProcessCircuitBreaker()
    const victim = 'ws-a:cfg@1:config.targets[0]'
    for (const key of hostileKeys(victim)) cb.record(key, ONE, false, T0)
    expect(cb.allow(victim, ONE, T0 + 1)).toBe(true)
    for (const key of hostileKeys(victim)) expect(cb.allow(key, ONE, T0 + 1)).toBe(false)
  })

  it('stays bounded under a flood of failing circuits', () => {
    const cb = new InProcessCircuitBreaker({ maxCircuits: 100 })
    for (let i = 0; i < 10_000; i++) cb.record(`flood:${i}`, ONE, false, T0)
    expect(cb.size).toBe(100)
  })
})

describe('Redis breaker: hostile keys across instances', () => {
  const made: RedisCircuitBreaker[] = []
  let admin: Redis

  async function breaker(): Promise<RedisCircuitBreaker> {
    const instance = new RedisCircuitBreaker({ url: inject('redisUrl') })
    made.push(instance)
    await instance.start()
    return instance
  }

  beforeAll(() => {
    admin = new Redis(inject('redisUrl'))
  })

  afterAll(async () => {
    await Promise.all(made.map((instance) => instance.close()))
    admin?.disconnect()
  })

  it('a key shaped like a message or a neighbour opens itself only, everywhere', async () => {
    const [a, b] = [await breaker(), await breaker()]
    const victim = `sec-${randomUUID()}:cfg@1:config.targets[0]`
    const keys = hostileKeys(victim)
    for (const key of keys) a.record(key, ONE, false, T0)
    await a.settled()
    // Every hostile circuit is open on the other instance, under its own exact name...
    for (const key of keys) await vi.waitFor(() => expect(b.allow(key, ONE, T0 + 1)).toBe(false), WAIT)
    // ...and the victim is closed on both, with nothing stored for it.
    expect(a.allow(victim, ONE, T0 + 1)).toBe(true)
    expect(b.allow(victim, ONE, T0 + 1)).toBe(true)
    expect(b.peek(victim)).toBeUndefined()
    expect(await admin.exists(`gateway:cb:${victim}`)).toBe(0)
  })

  it('a success on a look-alike key does not close the victim’s open circuit', async () => {
    const [a, b] = [await breaker(), await breaker()]
    const victim = `sec-${randomUUID()}:cfg@1:config.targets[1]`
    a.record(victim, ONE, false, T0)
    await a.settled()
    await vi.waitFor(() => expect(b.allow(victim, ONE, T0 + 1)).toBe(false), WAIT)
    const cooled = T0 + ONE.cooldownMs
    for (const key of hostileKeys(victim)) {
      a.record(key, ONE, false, T0)
      await a.settled()
      expect(await a.allow(key, ONE, cooled)).toBe(true)
      a.record(key, ONE, true, cooled)
    }
    await a.settled()
    // A probe-free message round: a fresh circuit opened after the look-alikes closed, seen by b.
    const marker = `sec-${randomUUID()}:marker`
    a.record(marker, ONE, false, T0)
    await a.settled()
    await vi.waitFor(() => expect(b.allow(marker, ONE, T0 + 1)).toBe(false), WAIT)
    expect(b.allow(victim, ONE, T0 + 1)).toBe(false)
    expect(b.peek(victim)?.openUntil).toBe(T0 + ONE.cooldownMs)
    expect(await admin.hget(`gateway:cb:${victim}`, 'o')).toBe(String(T0 + ONE.cooldownMs))
  })

  it('every stored circuit expires, so a flood of failing circuits does not stay in Redis', async () => {
    const cb: CircuitBreaker & { settled(): Promise<void> } = await breaker()
    const prefix = `sec-${randomUUID()}:flood:`
    for (let i = 0; i < 50; i++) cb.record(`${prefix}${i}`, { failureThreshold: 5, cooldownMs: 1_000 }, false, T0)
    for (let i = 50; i < 100; i++) cb.record(`${prefix}${i}`, ONE, false, T0)
    await cb.settled()
    const ttls = await Promise.all(Array.from({ length: 100 }, (_, i) => admin.pttl(`gateway:cb:${prefix}${i}`)))
    expect(ttls.every((ttl) => ttl > 0 && ttl <= ONE.cooldownMs + 3_600_000)).toBe(true)
  })
})
