import { describe, expect, it } from 'vitest'
import { bucketTtlMs, bucketWaitMs, InProcessRateLimiter, refillBucket } from '../../adapters/memory/in-process-rate-limiter.js'
import type { BucketSpec } from '../../core/limits.js'
import { MAX_BUCKET_TTL_MS } from '../../core/rate-limits.js'
import { describeRateLimiterContract } from './rate-limiter.contract.js'

describeRateLimiterContract(
  'in-process',
  async () => {
    const limiter = new InProcessRateLimiter()
    await limiter.start()
    return limiter
  },
  { sharedState: false },
)

const RPM_60: BucketSpec = { key: 'k', capacity: 60, windowMs: 60_000 }
const T0 = 1_000_000

describe('token bucket math', () => {
  it('starts a missing bucket full', () => {
    expect(refillBucket(undefined, RPM_60, T0)).toEqual({ tokens: 60, ts: T0 })
  })

  it('refills at capacity per window, continuously', () => {
    expect(refillBucket({ tokens: 0, ts: T0 }, RPM_60, T0 + 1_000)).toEqual({ tokens: 1, ts: T0 + 1_000 })
    expect(refillBucket({ tokens: 0, ts: T0 }, RPM_60, T0 + 500)).toEqual({ tokens: 0.5, ts: T0 + 500 })
    expect(refillBucket({ tokens: 10, ts: T0 }, RPM_60, T0 + 30_000)).toEqual({ tokens: 40, ts: T0 + 30_000 })
  })

  it('caps at the capacity, also when the stored state holds more (capacity lowered)', () => {
    expect(refillBucket({ tokens: 59, ts: T0 }, RPM_60, T0 + 3_600_000).tokens).toBe(60)
    expect(refillBucket({ tokens: 500, ts: T0 }, RPM_60, T0).tokens).toBe(60)
  })

  it('refills a negative bucket from below zero', () => {
    expect(refillBucket({ tokens: -120, ts: T0 }, RPM_60, T0 + 60_000).tokens).toBe(-60)
  })

  it('does not refill, or move the timestamp back, for an earlier now', () => {
    expect(refillBucket({ tokens: 5, ts: T0 }, RPM_60, T0 - 5_000)).toEqual({ tokens: 5, ts: T0 })
  })

  it('never refills a zero-capacity bucket', () => {
    const zero = { ...RPM_60, capacity: 0 }
    expect(refillBucket({ tokens: 0, ts: T0 }, zero, T0 + 3_600_000).tokens).toBe(0)
  })

  it('computes the wait until enough tokens refilled, rounded up to the ms', () => {
    expect(bucketWaitMs(5, 3, RPM_60)).toBe(0)
    expect(bucketWaitMs(0, 1, RPM_60)).toBe(1_000)
    expect(bucketWaitMs(0.25, 1, RPM_60)).toBe(750)
    expect(bucketWaitMs(-59, 1, RPM_60)).toBe(60_000)
    expect(bucketWaitMs(0, 1, { key: 'k', capacity: 7, windowMs: 1_000 })).toBe(143)
  })

  it('waits a full window when the demand never fits', () => {
    expect(bucketWaitMs(0, 61, RPM_60)).toBe(60_000)
    expect(bucketWaitMs(0, 1, { ...RPM_60, capacity: 0 })).toBe(60_000)
  })

  it('keeps a bucket two windows, longer while it is refilling from below zero, never past the cap', () => {
    expect(bucketTtlMs(60, RPM_60)).toBe(120_000)
    expect(bucketTtlMs(-600, RPM_60)).toBe(660_000)
    expect(bucketTtlMs(-1e15, RPM_60)).toBe(MAX_BUCKET_TTL_MS)
  })
})

describe('InProcessRateLimiter', () => {
  it('takes from requests buckets and leaves tokens buckets to the charge', () => {
    const limiter = new InProcessRateLimiter()
    const requests: BucketSpec = { key: 'r', capacity: 3, windowMs: 60_000 }
    const tokens: BucketSpec = { key: 't', capacity: 1_000, windowMs: 60_000 }
    expect(limiter.acquireNow([{ bucket: requests, take: 1, require: 0 }, { bucket: tokens, take: 0, require: 500 }], T0)).toEqual({ allowed: true })
    expect(limiter.peek('r')).toEqual({ tokens: 2, ts: T0 })
    expect(limiter.peek('t')).toEqual({ tokens: 1_000, ts: T0 })
    limiter.chargeNow([{ bucket: tokens, amount: 1_400 }], T0 + 6_000)
    expect(limiter.peek('t')).toEqual({ tokens: -400, ts: T0 + 6_000 })
  })

  it('writes nothing when refused', () => {
    const limiter = new InProcessRateLimiter()
    const a: BucketSpec = { key: 'a', capacity: 3, windowMs: 60_000 }
    const b: BucketSpec = { key: 'b', capacity: 0, windowMs: 60_000 }
    expect(limiter.acquireNow([{ bucket: a, take: 1, require: 0 }, { bucket: b, take: 1, require: 0 }], T0).allowed).toBe(false)
    expect(limiter.size).toBe(0)
  })

  it('drops buckets that are full again and idle for two windows', () => {
    const limiter = new InProcessRateLimiter()
    const rps: BucketSpec = { key: 's', capacity: 1, windowMs: 1_000 }
    const day: BucketSpec = { key: 'd', capacity: 1, windowMs: 86_400_000 }
    limiter.acquireNow([{ bucket: rps, take: 1, require: 0 }, { bucket: day, take: 1, require: 0 }], T0)
    expect(limiter.size).toBe(2)
    limiter.acquireNow([], T0 + 120_000)
    expect(limiter.peek('s')).toBeUndefined()
    expect(limiter.peek('d')).toEqual({ tokens: 0, ts: T0 })
  })
})
