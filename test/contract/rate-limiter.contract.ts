/**
 * The `RateLimiter` contract, asserted through the port only: token buckets (capacity, continuous
 * refill, `Retry-After` waits, below zero after a charge), all or nothing across the buckets of one
 * call, and exactness under concurrency.
 *
 * Every test uses its own hash tag (`{rlc-<uuid>}`), so runs share a Redis safely and every key of
 * one call lands in one Redis Cluster slot. Time is passed explicitly (`nowMs`), so nothing waits.
 *
 * `makeLimiter` must return a started limiter; the suite closes what it made after each test.
 * `sharedState`: separately made limiters share buckets (Redis), so the concurrency test also runs
 * across several limiter instances, as several gateway instances would.
 */
import { randomUUID } from 'node:crypto'
import { afterEach, describe, expect, it } from 'vitest'
import type { BucketSpec } from '../../core/limits.js'
import type { RateLimiter } from '../../core/rate-limits.js'

const MINUTE = 60_000
/** A fixed clock origin: the contract never depends on real time. */
const T0 = 1_800_000_000_000

export interface RateLimiterContractOptions {
  readonly sharedState: boolean
}

export function describeRateLimiterContract(
  name: string,
  makeLimiter: () => Promise<RateLimiter>,
  options: RateLimiterContractOptions,
): void {
  describe(`RateLimiter contract: ${name}`, () => {
    const made: RateLimiter[] = []
    let tag = ''

    async function limiter(): Promise<RateLimiter> {
      const instance = await makeLimiter()
      made.push(instance)
      return instance
    }

    function bucket(name: string, capacity: number, windowMs = MINUTE): BucketSpec {
      return { key: `rl:{${tag}}:contract:${name}`, capacity, windowMs }
    }

    afterEach(async () => {
      await Promise.all(made.splice(0).map((instance) => instance.close()))
    })

    // A fresh tag per test (beforeEach is not used so the tag exists before `bucket` is called).
    function freshTag(): void {
      tag = `rlc-${randomUUID()}`
    }

    it('allows up to the capacity, then refuses with the wait until one token refilled', async () => {
      freshTag()
      const rl = await limiter()
      const rpm3 = bucket('rpm3', 3)
      for (let i = 0; i < 3; i++) expect(await rl.acquire([{ bucket: rpm3, take: 1, require: 0 }], T0)).toEqual({ allowed: true })
      expect(await rl.acquire([{ bucket: rpm3, take: 1, require: 0 }], T0)).toEqual({ allowed: false, index: 0, retryAfterMs: 20_000 })
      // 5 s later a third of a token came back: 15 s left.
      expect(await rl.acquire([{ bucket: rpm3, take: 1, require: 0 }], T0 + 5_000)).toEqual({ allowed: false, index: 0, retryAfterMs: 15_000 })
      expect(await rl.acquire([{ bucket: rpm3, take: 1, require: 0 }], T0 + 20_000)).toEqual({ allowed: true })
      expect((await rl.acquire([{ bucket: rpm3, take: 1, require: 0 }], T0 + 20_000)).allowed).toBe(false)
    })

    it('refills continuously but never above the capacity', async () => {
      freshTag()
      const rl = await limiter()
      const rps2 = bucket('rps2', 2, 1_000)
      expect((await rl.acquire([{ bucket: rps2, take: 2, require: 0 }], T0)).allowed).toBe(true)
      // An hour idle refills to 2, not more.
      const later = T0 + 3_600_000
      expect((await rl.acquire([{ bucket: rps2, take: 2, require: 0 }], later)).allowed).toBe(true)
      expect(await rl.acquire([{ bucket: rps2, take: 1, require: 0 }], later)).toEqual({ allowed: false, index: 0, retryAfterMs: 500 })
    })

    it('lets exactly the capacity through 200 concurrent acquires against a limit of 50', async () => {
      freshTag()
      const instances = options.sharedState ? await Promise.all([limiter(), limiter(), limiter(), limiter()]) : [await limiter()]
      const limit50 = bucket('limit50', 50)
      const decisions = await Promise.all(
        Array.from({ length: 200 }, (_, i) => (instances[i % instances.length] as RateLimiter).acquire([{ bucket: limit50, take: 1, require: 0 }], T0)),
      )
      expect(decisions.filter((decision) => decision.allowed)).toHaveLength(50)
      expect(decisions.filter((decision) => !decision.allowed)).toHaveLength(150)
    })

    it('is all or nothing: one short bucket refuses the call and leaves the others untouched', async () => {
      freshTag()
      const rl = await limiter()
      const wide = bucket('wide', 5)
      const narrow = bucket('narrow', 1)
      const tokens = bucket('tokens', 100)
      expect((await rl.acquire([{ bucket: narrow, take: 1, require: 0 }], T0)).allowed).toBe(true)
      const refused = await rl.acquire(
        [
          { bucket: wide, take: 1, require: 0 },
          { bucket: tokens, take: 0, require: 10 },
          { bucket: narrow, take: 1, require: 0 },
        ],
        T0,
      )
      expect(refused).toEqual({ allowed: false, index: 2, retryAfterMs: MINUTE })
      // `wide` still holds all 5 tokens: the refused call took nothing from it.
      expect((await rl.acquire([{ bucket: wide, take: 5, require: 0 }], T0)).allowed).toBe(true)
      expect((await rl.acquire([{ bucket: wide, take: 1, require: 0 }], T0)).allowed).toBe(false)
    })

    it('reports the first refusing bucket of the call', async () => {
      freshTag()
      const rl = await limiter()
      const a = bucket('a', 0)
      const b = bucket('b', 0)
      expect(await rl.acquire([{ bucket: bucket('ok', 10), take: 1, require: 0 }, { bucket: a, take: 1, require: 0 }, { bucket: b, take: 1, require: 0 }], T0)).toMatchObject({
        allowed: false,
        index: 1,
      })
    })

    it('counts a bucket named twice in one call twice', async () => {
      freshTag()
      const rl = await limiter()
      const one = bucket('one', 1)
      expect(await rl.acquire([{ bucket: one, take: 1, require: 0 }, { bucket: one, take: 1, require: 0 }], T0)).toMatchObject({ allowed: false, index: 1 })
      expect((await rl.acquire([{ bucket: one, take: 1, require: 0 }], T0)).allowed).toBe(true)
    })

    it('requires tokens without taking them, and charges real usage after', async () => {
      freshTag()
      const rl = await limiter()
      const tpm = bucket('tpm100', 100)
      expect((await rl.acquire([{ bucket: tpm, take: 0, require: 100 }], T0)).allowed).toBe(true)
      expect((await rl.acquire([{ bucket: tpm, take: 0, require: 100 }], T0)).allowed).toBe(true)
      await rl.charge([{ bucket: tpm, amount: 80 }], T0)
      // 20 left: 30 needs 10 more, i.e. 10 / (100 per minute) = 6 s.
      expect(await rl.acquire([{ bucket: tpm, take: 0, require: 30 }], T0)).toEqual({ allowed: false, index: 0, retryAfterMs: 6_000 })
      expect((await rl.acquire([{ bucket: tpm, take: 0, require: 20 }], T0)).allowed).toBe(true)
    })

    it('lets a charge drive a bucket below zero, and later requests wait for it to refill', async () => {
      freshTag()
      const rl = await limiter()
      const tpm = bucket('tpm100', 100)
      await rl.charge([{ bucket: tpm, amount: 250 }], T0)
      // -150 now: one token needs 151 → 90.6 s, rounded up to the ms.
      expect(await rl.acquire([{ bucket: tpm, take: 0, require: 1 }], T0)).toEqual({ allowed: false, index: 0, retryAfterMs: 90_600 })
      expect((await rl.acquire([{ bucket: tpm, take: 0, require: 1 }], T0 + 90_600)).allowed).toBe(true)
    })

    it('charges several buckets in one call', async () => {
      freshTag()
      const rl = await limiter()
      const a = bucket('a', 100)
      const b = bucket('b', 1_000)
      await rl.charge([{ bucket: a, amount: 60 }, { bucket: b, amount: 60 }], T0)
      expect(await rl.acquire([{ bucket: b, take: 0, require: 941 }, { bucket: a, take: 0, require: 41 }], T0)).toMatchObject({ allowed: false, index: 0 })
      expect(await rl.acquire([{ bucket: b, take: 0, require: 940 }, { bucket: a, take: 0, require: 41 }], T0)).toMatchObject({ allowed: false, index: 1 })
      expect((await rl.acquire([{ bucket: b, take: 0, require: 940 }, { bucket: a, take: 0, require: 40 }], T0)).allowed).toBe(true)
    })

    it('refuses for a full window when the demand can never fit: zero capacity, or more than the capacity', async () => {
      freshTag()
      const rl = await limiter()
      expect(await rl.acquire([{ bucket: bucket('zero', 0, 3_600_000), take: 1, require: 0 }], T0)).toEqual({ allowed: false, index: 0, retryAfterMs: 3_600_000 })
      expect(await rl.acquire([{ bucket: bucket('small', 100), take: 0, require: 101 }], T0)).toEqual({ allowed: false, index: 0, retryAfterMs: MINUTE })
    })

    it('never runs time backwards (another instance with a slower clock)', async () => {
      freshTag()
      const rl = await limiter()
      const rpm2 = bucket('rpm2', 2)
      expect((await rl.acquire([{ bucket: rpm2, take: 2, require: 0 }], T0)).allowed).toBe(true)
      expect(await rl.acquire([{ bucket: rpm2, take: 1, require: 0 }], T0 - 10_000)).toEqual({ allowed: false, index: 0, retryAfterMs: 30_000 })
      expect((await rl.acquire([{ bucket: rpm2, take: 1, require: 0 }], T0 + 30_000)).allowed).toBe(true)
    })

    it('follows a changed capacity at once (a rule lowered by an admin)', async () => {
      freshTag()
      const rl = await limiter()
      const key = 'changing'
      expect((await rl.acquire([{ bucket: bucket(key, 10), take: 1, require: 0 }], T0)).allowed).toBe(true)
      // 9 tokens stored; with the capacity now 2 the bucket holds 2.
      expect((await rl.acquire([{ bucket: bucket(key, 2), take: 2, require: 0 }], T0)).allowed).toBe(true)
      expect((await rl.acquire([{ bucket: bucket(key, 2), take: 1, require: 0 }], T0)).allowed).toBe(false)
    })

    it('allows an empty call', async () => {
      freshTag()
      const rl = await limiter()
      expect(await rl.acquire([], T0)).toEqual({ allowed: true })
      await rl.charge([], T0)
    })

    it('reports healthy once started', async () => {
      freshTag()
      const rl = await limiter()
      expect(await rl.health()).toEqual({ ok: true })
    })
  })
}
