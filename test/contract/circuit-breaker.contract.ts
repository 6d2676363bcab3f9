/**
 * The `CircuitBreaker` contract, asserted through the port only: the threshold opens a circuit, a
 * success resets the count, the cool-down, exactly one half-open probe (across instances when they
 * share a store), the probe's outcome closing or reopening, an unreported probe's claim expiring,
 * stragglers ignored while open, and key isolation.
 *
 * Time is passed explicitly (`now`), so nothing waits for a cool-down. Every test uses its own key
 * prefix, so runs share a Redis safely. `record` is fire-and-forget: `settle(breaker)` resolves
 * once what it recorded has been applied (the in-process breaker applies at once).
 *
 * `makeBreaker` must return a started breaker; the suite closes what it made after each test.
 * `sharedState`: separately made breakers share circuits (Redis), so the cross-instance cases run:
 * one instance opening is seen by another (polled, bounded wait) and the single probe.
 */
import { randomUUID } from 'node:crypto'
import { afterEach, describe, expect, it, vi } from 'vitest'
import type { CircuitBreaker, CircuitSetting } from '../../core/ports.js'

/** A fixed clock origin: the contract never depends on real time. */
const T0 = 1_800_000_000_000
const SETTING: CircuitSetting = { failureThreshold: 3, cooldownMs: 30_000 }
const WAIT = { timeout: 10_000, interval: 10 }

export interface CircuitBreakerContractOptions {
  readonly sharedState: boolean
  /** Resolves once every outcome `breaker` recorded so far has been applied. */
  readonly settle: (breaker: CircuitBreaker) => Promise<void>
}

export function describeCircuitBreakerContract(name: string, makeBreaker: () => Promise<CircuitBreaker>, options: CircuitBreakerContractOptions): void {
  describe(`CircuitBreaker contract: ${name}`, () => {
    const made: CircuitBreaker[] = []
    let prefix = ''

    async function breaker(): Promise<CircuitBreaker> {
      const instance = await makeBreaker()
      made.push(instance)
      return instance
    }

    function key(name: string): string {
      if (prefix === '') prefix = `cbc-${randomUUID()}`
      return `${prefix}:config.targets[0]:${name}`
    }

    async function fail(cb: CircuitBreaker, circuit: string, times: number, now: number, setting = SETTING): Promise<void> {
      for (let i = 0; i < times; i++) cb.record(circuit, setting, false, now)
      await options.settle(cb)
    }

    afterEach(async () => {
      prefix = ''
      await Promise.all(made.splice(0).map((instance) => instance.close()))
    })

    it('answers a closed circuit synchronously, also with failures counted', async () => {
      const cb = await breaker()
      const circuit = key('sync')
      expect(cb.allow(circuit, SETTING, T0)).toBe(true)
      await fail(cb, circuit, 2, T0)
      expect(cb.allow(circuit, SETTING, T0)).toBe(true)
    })

    it('opens at the threshold of failures in a row and refuses synchronously while open', async () => {
      const cb = await breaker()
      const circuit = key('threshold')
      await fail(cb, circuit, 2, T0)
      expect(cb.allow(circuit, SETTING, T0 + 1)).toBe(true)
      await fail(cb, circuit, 1, T0 + 2)
      expect(cb.allow(circuit, SETTING, T0 + 3)).toBe(false)
      expect(cb.allow(circuit, SETTING, T0 + 2 + SETTING.cooldownMs - 1)).toBe(false)
    })

    it('opens on the first failure with a threshold of 1', async () => {
      const cb = await breaker()
      const circuit = key('one')
      const setting = { failureThreshold: 1, cooldownMs: 5_000 }
      await fail(cb, circuit, 1, T0, setting)
      expect(cb.allow(circuit, setting, T0)).toBe(false)
    })

    it('resets the count on a success: failures must come in a row', async () => {
      const cb = await breaker()
      const circuit = key('reset')
      await fail(cb, circuit, 2, T0)
      cb.record(circuit, SETTING, true, T0 + 1)
      await fail(cb, circuit, 2, T0 + 2)
      expect(cb.allow(circuit, SETTING, T0 + 3)).toBe(true)
      await fail(cb, circuit, 1, T0 + 4)
      expect(cb.allow(circuit, SETTING, T0 + 5)).toBe(false)
    })

    it('applies outcomes in the order recorded, also when none was applied yet', async () => {
      const cb = await breaker()
      const circuit = key('order')
      for (const success of [false, false, true, false, false]) cb.record(circuit, SETTING, success, T0)
      await options.settle(cb)
      expect(cb.allow(circuit, SETTING, T0 + 1)).toBe(true)
      await fail(cb, circuit, 1, T0 + 2)
      expect(cb.allow(circuit, SETTING, T0 + 3)).toBe(false)
    })

    it('lets exactly one probe through once the cool-down has passed', async () => {
      const cb = await breaker()
      const circuit = key('probe')
      await fail(cb, circuit, 3, T0)
      expect(await cb.allow(circuit, SETTING, T0 + SETTING.cooldownMs - 1)).toBe(false)
      const answers = await Promise.all(Array.from({ length: 20 }, () => cb.allow(circuit, SETTING, T0 + SETTING.cooldownMs)))
      expect(answers.filter(Boolean)).toHaveLength(1)
      expect(await cb.allow(circuit, SETTING, T0 + SETTING.cooldownMs + 10)).toBe(false)
    })

    it('closes on the probe’s success, with the count back at 0', async () => {
      const cb = await breaker()
      const circuit = key('probe-ok')
      await fail(cb, circuit, 3, T0)
      const probeAt = T0 + SETTING.cooldownMs
      expect(await cb.allow(circuit, SETTING, probeAt)).toBe(true)
      cb.record(circuit, SETTING, true, probeAt + 100)
      await options.settle(cb)
      for (let i = 0; i < 5; i++) expect(cb.allow(circuit, SETTING, probeAt + 200)).toBe(true)
      await fail(cb, circuit, 2, probeAt + 300)
      expect(cb.allow(circuit, SETTING, probeAt + 400)).toBe(true)
    })

    it('opens again for a full cool-down on the probe’s failure', async () => {
      const cb = await breaker()
      const circuit = key('probe-fail')
      await fail(cb, circuit, 3, T0)
      const probeAt = T0 + SETTING.cooldownMs
      expect(await cb.allow(circuit, SETTING, probeAt)).toBe(true)
      await fail(cb, circuit, 1, probeAt + 500)
      expect(await cb.allow(circuit, SETTING, probeAt + 500 + SETTING.cooldownMs - 1)).toBe(false)
      expect(await cb.allow(circuit, SETTING, probeAt + 500 + SETTING.cooldownMs)).toBe(true)
    })

    it('lets another caller probe once an unreported probe’s claim expired', async () => {
      const cb = await breaker()
      const circuit = key('probe-lost')
      await fail(cb, circuit, 3, T0)
      const probeAt = T0 + SETTING.cooldownMs
      expect(await cb.allow(circuit, SETTING, probeAt)).toBe(true)
      expect(await cb.allow(circuit, SETTING, probeAt + SETTING.cooldownMs - 1)).toBe(false)
      expect(await cb.allow(circuit, SETTING, probeAt + SETTING.cooldownMs)).toBe(true)
      expect(await cb.allow(circuit, SETTING, probeAt + SETTING.cooldownMs)).toBe(false)
    })

    it('ignores outcomes recorded while open (attempts allowed before it opened)', async () => {
      const cb = await breaker()
      const circuit = key('stragglers')
      await fail(cb, circuit, 3, T0)
      cb.record(circuit, SETTING, true, T0 + 10)
      await fail(cb, circuit, 5, T0 + 20)
      expect(await cb.allow(circuit, SETTING, T0 + 30)).toBe(false)
      // The failures did not extend the cool-down, nor did the success close the circuit.
      expect(await cb.allow(circuit, SETTING, T0 + SETTING.cooldownMs)).toBe(true)
    })

    it('keeps circuits apart: another key, a key it prefixes and another setting’s key stay closed', async () => {
      const cb = await breaker()
      const circuit = key('isolated')
      await fail(cb, circuit, 3, T0)
      expect(cb.allow(circuit, SETTING, T0 + 1)).toBe(false)
      expect(cb.allow(key('other'), SETTING, T0 + 1)).toBe(true)
      expect(cb.allow(`${circuit}:x`, SETTING, T0 + 1)).toBe(true)
      expect(cb.allow(circuit.slice(0, -1), SETTING, T0 + 1)).toBe(true)
      // Failures on other circuits do not add up to this one's count.
      const fresh = key('fresh')
      await fail(cb, key('a'), 2, T0)
      await fail(cb, key('b'), 2, T0)
      await fail(cb, fresh, 2, T0)
      expect(cb.allow(fresh, SETTING, T0 + 1)).toBe(true)
    })

    if (!options.sharedState) return

    it('shows a circuit one instance opened to another (polled, bounded wait)', async () => {
      const [a, b] = [await breaker(), await breaker()]
      const circuit = key('seen')
      expect(b.allow(circuit, SETTING, T0)).toBe(true)
      await fail(a, circuit, 3, T0)
      await vi.waitFor(() => expect(b.allow(circuit, SETTING, T0 + 1)).toBe(false), WAIT)
    })

    it('counts failures from several instances in one row', async () => {
      const [a, b] = [await breaker(), await breaker()]
      const circuit = key('together')
      await fail(a, circuit, 2, T0)
      await fail(b, circuit, 1, T0 + 1)
      expect(b.allow(circuit, SETTING, T0 + 2)).toBe(false)
      await vi.waitFor(() => expect(a.allow(circuit, SETTING, T0 + 2)).toBe(false), WAIT)
    })

    it('grants one probe across instances sharing the store', async () => {
      const instances = [await breaker(), await breaker(), await breaker()]
      const circuit = key('one-probe')
      await fail(instances[0] as CircuitBreaker, circuit, 3, T0)
      for (const instance of instances) await vi.waitFor(() => expect(instance.allow(circuit, SETTING, T0 + 1)).toBe(false), WAIT)
      const probeAt = T0 + SETTING.cooldownMs
      const answers = await Promise.all(instances.flatMap((instance) => Array.from({ length: 10 }, () => instance.allow(circuit, SETTING, probeAt))))
      expect(answers.filter(Boolean)).toHaveLength(1)
      // Its success, recorded by whichever instance sent it, closes the circuit everywhere.
      const prober = instances[Math.floor(answers.indexOf(true) / 10)] as CircuitBreaker
      prober.record(circuit, SETTING, true, probeAt + 100)
      await options.settle(prober)
      for (const instance of instances) await vi.waitFor(() => expect(instance.allow(circuit, SETTING, probeAt + 200)).toBe(true), WAIT)
    })
  })
}
