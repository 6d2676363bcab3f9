/**
 * The `ResponseCache` contract, asserted through the port against both adapters: the in-process LRU
 * and Redis (the run's throwaway server, `inject('redisUrl')`). Then what only one of them does:
 * the in-process byte bound and LRU order, Redis's key prefix, `EX` and failure behaviour.
 *
 * Keys carry a fresh UUID per test, so runs can share a Redis. Expiry: the in-process adapter reads
 * an injected clock that the test moves; on Redis the test waits out a one-second `max_age`.
 */
import { randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest'
import { ENTRY_OVERHEAD_BYTES, InProcessResponseCache } from '../../adapters/memory/in-process-response-cache.js'
import { decodeCachedResponse, encodeCachedResponse, RedisResponseCache, RESPONSE_CACHE_PREFIX } from '../../adapters/redis/redis-response-cache.js'
import type { CachedResponse, ResponseCache } from '../../core/ports.js'
import { freePorts, startRedis } from '../helpers/services.js'

const MIB = 1_048_576

class FakeClock {
  at = 1_800_000_000_000
  now(): number {
    return this.at
  }
}

interface Subject {
  readonly cache: ResponseCache
  /** Lets `seconds` pass for the cache's expiry. */
  readonly pass: (seconds: number) => Promise<void>
}

function entry(text: string, status = 200, contentType = 'application/json'): CachedResponse {
  return { status, headers: [['content-type', contentType]], body: Buffer.from(text, 'utf8') }
}

function bodyText(value: CachedResponse | null): string | null {
  return value === null ? null : Buffer.from(value.body).toString('utf8')
}

function describeResponseCacheContract(name: string, make: () => Promise<Subject>): void {
  describe(`ResponseCache contract: ${name}`, () => {
    const made: ResponseCache[] = []
    let tag = ''

    async function subject(): Promise<Subject> {
      tag = randomUUID()
      const value = await make()
      made.push(value.cache)
      return value
    }
    const key = (name: string): string => `${tag}:${name}`

    afterEach(async () => {
      await Promise.all(made.splice(0).map((cache) => cache.close()))
    })

    it('answers null for a key never stored', async () => {
      const { cache } = await subject()
      expect(await cache.get(key('nothing'))).toBeNull()
    })

    it('gives back status, headers and body as stored', async () => {
      const { cache } = await subject()
      const stored: CachedResponse = {
        status: 201,
        headers: [
          ['content-type', 'text/event-stream; charset=utf-8'],
          ['content-language', 'en'],
        ],
        body: Buffer.from('data: {"id":"1"}\n\ndata: [DONE]\n\n'),
      }
      await cache.set(key('a'), stored, 60)
      const found = await cache.get(key('a'))
      expect(found?.status).toBe(201)
      expect(found?.headers).toEqual(stored.headers)
      expect(bodyText(found)).toBe('data: {"id":"1"}\n\ndata: [DONE]\n\n')
    })

    it('keeps bodies byte for byte: every byte value, invalid UTF-8, an empty body', async () => {
      const { cache } = await subject()
      const every = Buffer.alloc(512)
      for (let i = 0; i < every.length; i++) every[i] = i % 256
      const invalid = Buffer.from([0xff, 0xfe, 0x00, 0xc3, 0x28, 0x0d, 0x0a, 0xe2, 0x82])
      await cache.set(key('every'), { status: 200, headers: [['content-type', 'audio/mpeg']], body: every }, 60)
      await cache.set(key('invalid'), { status: 200, headers: [], body: invalid }, 60)
      await cache.set(key('empty'), { status: 200, headers: [], body: new Uint8Array(0) }, 60)
      expect(Buffer.from((await cache.get(key('every')))?.body ?? []).equals(every)).toBe(true)
      expect(Buffer.from((await cache.get(key('invalid')))?.body ?? []).equals(invalid)).toBe(true)
      const empty = await cache.get(key('empty'))
      expect(empty?.body.byteLength).toBe(0)
      expect(empty?.headers).toEqual([])
    })

    it('replaces an entry stored again under the same key', async () => {
      const { cache } = await subject()
      await cache.set(key('k'), entry('first'), 60)
      await cache.set(key('k'), entry('second'), 60)
      expect(bodyText(await cache.get(key('k')))).toBe('second')
    })

    it('keeps keys apart, including keys that differ only in case or a trailing character', async () => {
      const { cache } = await subject()
      await cache.set(key('abc'), entry('lower'), 60)
      await cache.set(key('ABC'), entry('upper'), 60)
      await cache.set(key('abc '), entry('space'), 60)
      expect(bodyText(await cache.get(key('abc')))).toBe('lower')
      expect(bodyText(await cache.get(key('ABC')))).toBe('upper')
      expect(bodyText(await cache.get(key('abc ')))).toBe('space')
      expect(await cache.get(key('ab'))).toBeNull()
    })

    it('expires an entry after max_age seconds, not before', async () => {
      const { cache, pass } = await subject()
      await cache.set(key('short'), entry('short'), 1)
      await cache.set(key('long'), entry('long'), 3600)
      expect(bodyText(await cache.get(key('short')))).toBe('short')
      await pass(1)
      expect(await cache.get(key('short'))).toBeNull()
      expect(bodyText(await cache.get(key('long')))).toBe('long')
    })

    it('a later set with another max_age starts the age afresh', async () => {
      const { cache, pass } = await subject()
      await cache.set(key('k'), entry('one'), 1)
      await cache.set(key('k'), entry('two'), 3600)
      await pass(1)
      expect(bodyText(await cache.get(key('k')))).toBe('two')
    })

    it('takes concurrent sets of many keys, each readable whole afterwards', async () => {
      const { cache } = await subject()
      const bodies = Array.from({ length: 50 }, (_, i) => `body-${i}-${'x'.repeat(i * 37)}`)
      await Promise.all(bodies.map((text, i) => cache.set(key(`c${i}`), entry(text), 60)))
      const read = await Promise.all(bodies.map((_, i) => cache.get(key(`c${i}`))))
      expect(read.map(bodyText)).toEqual(bodies)
    })

    it('concurrent sets of one key leave one of the values, whole', async () => {
      const { cache } = await subject()
      const bodies = Array.from({ length: 20 }, (_, i) => `${String(i).padStart(2, '0')}:${String(i).repeat(4096)}`)
      await Promise.all(bodies.map((text) => cache.set(key('same'), entry(text), 60)))
      expect(bodies).toContain(bodyText(await cache.get(key('same'))))
    })

    it('reports healthy while it works', async () => {
      const { cache } = await subject()
      expect(await cache.health()).toEqual({ ok: true })
    })
  })
}

describeResponseCacheContract('in-process', async () => {
  const clock = new FakeClock()
  const cache = new InProcessResponseCache({ maxBytes: 64 * MIB, clock })
  await cache.start()
  return {
    cache,
    pass: async (seconds) => {
      clock.at += seconds * 1000
    },
  }
})

describeResponseCacheContract('redis', async () => {
  const cache = new RedisResponseCache({ url: inject('redisUrl') })
  await cache.start()
  return {
    cache,
    // Redis expires a key within a millisecond of its deadline when it is read.
    pass: (seconds) => new Promise((resolve) => setTimeout(resolve, seconds * 1000 + 50)),
  }
})

describe('InProcessResponseCache bounds', () => {
  const size = (key: string, body: number): number => ENTRY_OVERHEAD_BYTES + key.length * 2 + body + ('content-type'.length + 'application/json'.length) * 2

  it('drops the least recently used entries once the bytes held pass maxBytes; a get makes an entry recent', async () => {
    const one = size('k0', 300_000)
    const cache = new InProcessResponseCache({ maxBytes: one * 3, clock: new FakeClock() })
    const body = (fill: string) => ({ status: 200, headers: [['content-type', 'application/json']] as const, body: Buffer.alloc(300_000, fill) })
    await cache.set('k0', body('0'), 60)
    await cache.set('k1', body('1'), 60)
    await cache.set('k2', body('2'), 60)
    expect(cache.stats()).toEqual({ entries: 3, bytes: one * 3, evicted: 0 })
    // k0 read: k1 is now the least recently used.
    expect(await cache.get('k0')).not.toBeNull()
    await cache.set('k3', body('3'), 60)
    expect(await cache.get('k1')).toBeNull()
    expect(await cache.get('k0')).not.toBeNull()
    expect(await cache.get('k2')).not.toBeNull()
    expect(Buffer.from((await cache.get('k3'))?.body ?? []).every((byte) => byte === 0x33)).toBe(true)
    expect(cache.stats()).toMatchObject({ entries: 3, bytes: one * 3, evicted: 1 })
  })

  it('does not store an entry larger than maxBytes, and drops an older entry under its key', async () => {
    const cache = new InProcessResponseCache({ maxBytes: 10_000, clock: new FakeClock() })
    await cache.set('k', entry('small'), 60)
    await cache.set('k', { status: 200, headers: [], body: Buffer.alloc(20_000) }, 60)
    expect(await cache.get('k')).toBeNull()
    expect(cache.stats()).toEqual({ entries: 0, bytes: 0, evicted: 0 })
  })

  it('one huge entry evicts as many small ones as it needs, and no more', async () => {
    const cache = new InProcessResponseCache({ maxBytes: 100_000, clock: new FakeClock() })
    for (let i = 0; i < 50; i++) await cache.set(`s${i}`, entry('x'.repeat(1_000)), 60)
    const before = cache.stats()
    expect(before.entries).toBe(50)
    await cache.set('huge', { status: 200, headers: [], body: Buffer.alloc(60_000) }, 60)
    const after = cache.stats()
    expect(after.bytes).toBeLessThanOrEqual(100_000)
    expect(await cache.get('huge')).not.toBeNull()
    // The oldest went first; the newest small entries are still there.
    expect(await cache.get('s0')).toBeNull()
    expect(await cache.get('s49')).not.toBeNull()
    expect(after.entries).toBe(50 - after.evicted + 1)
  })

  it('keeps its own copy of the body: the bytes handed in may change or be a view on a larger buffer', async () => {
    const cache = new InProcessResponseCache({ maxBytes: MIB, clock: new FakeClock() })
    const socketRead = Buffer.alloc(64 * 1024, 0x61)
    const view = socketRead.subarray(100, 110)
    await cache.set('k', { status: 200, headers: [], body: view }, 60)
    socketRead.fill(0x62)
    const found = await cache.get('k')
    expect(Buffer.from(found?.body ?? []).toString()).toBe('aaaaaaaaaa')
    // Its own buffer of its own size, not the 64 KiB read buffer.
    expect(found?.body.buffer.byteLength).toBe(10)
    expect(cache.stats().bytes).toBe(ENTRY_OVERHEAD_BYTES + 2 + 10)
  })

  it('frees the bytes of an entry found expired', async () => {
    const clock = new FakeClock()
    const cache = new InProcessResponseCache({ maxBytes: MIB, clock })
    await cache.set('k', entry('old'), 5)
    clock.at += 5_000
    expect(await cache.get('k')).toBeNull()
    expect(cache.stats()).toEqual({ entries: 0, bytes: 0, evicted: 0 })
  })

  it('refuses a maxBytes that is not a positive integer', () => {
    expect(() => new InProcessResponseCache({ maxBytes: 0 })).toThrow(/maxBytes/)
  })
})

describe('RedisResponseCache', () => {
  let admin: Redis

  beforeAll(() => {
    admin = new Redis(inject('redisUrl'))
  })
  afterAll(() => {
    admin?.disconnect()
  })

  it('writes gw:cache:<key> with EX max_age, the body bytes after a small binary header', async () => {
    const cache = new RedisResponseCache({ url: inject('redisUrl') })
    await cache.start()
    try {
      const key = randomUUID()
      await cache.set(key, entry('{"ok":true}'), 600)
      const ttl = await admin.ttl(`${RESPONSE_CACHE_PREFIX}${key}`)
      expect(ttl).toBeGreaterThan(590)
      expect(ttl).toBeLessThanOrEqual(600)
      const raw = (await admin.getBuffer(`${RESPONSE_CACHE_PREFIX}${key}`)) as Buffer
      expect(raw.subarray(raw.length - 11).toString()).toBe('{"ok":true}')
      expect(await admin.exists(key)).toBe(0)
    } finally {
      await cache.close()
    }
  })

  it('reads a value it did not write under its prefix (another format, cut short, foreign JSON) as a miss', async () => {
    const cache = new RedisResponseCache({ url: inject('redisUrl') })
    await cache.start()
    try {
      const key = randomUUID()
      const good = encodeCachedResponse(entry('hello'))
      for (const value of [Buffer.from('plain text'), good.subarray(0, 8), Buffer.concat([Buffer.from([2]), good.subarray(1)]), Buffer.from([1, 0, 0, 0, 4, 0x6e, 0x75, 0x6c, 0x6c])]) {
        await admin.set(`${RESPONSE_CACHE_PREFIX}${key}`, value)
        expect(await cache.get(key)).toBeNull()
      }
    } finally {
      await cache.close()
    }
  })

  it('round-trips the stored form, and refuses headers that are not string pairs', () => {
    const value: CachedResponse = { status: 200, headers: [['content-type', 'text/event-stream']], body: Buffer.from([0, 1, 2, 255]) }
    const decoded = decodeCachedResponse(encodeCachedResponse(value))
    expect(decoded?.status).toBe(200)
    expect(decoded?.headers).toEqual(value.headers)
    expect(Buffer.from(decoded?.body ?? []).equals(Buffer.from([0, 1, 2, 255]))).toBe(true)
    const meta = Buffer.from(JSON.stringify({ s: 200, h: [['content-type', 5]] }))
    const head = Buffer.alloc(5)
    head[0] = 1
    head.writeUInt32BE(meta.length, 1)
    expect(decodeCachedResponse(Buffer.concat([head, meta]))).toBeNull()
  })

  it('fails fast once its server is gone (the plugin serves a miss), and reports it', async () => {
    const own = await startRedis()
    const cache = new RedisResponseCache({ url: own.url, commandTimeoutMs: 200 })
    await cache.start()
    await cache.set('k', entry('x'), 60)
    await own.stop()
    await expect(cache.get('k')).rejects.toThrow()
    await expect(cache.set('k', entry('y'), 60)).rejects.toThrow()
    expect((await cache.health()).ok).toBe(false)
    await cache.close()
    expect(await cache.health()).toEqual({ ok: false, detail: 'closed' })
  })

  it('fails start against a closed port with a message naming REDIS_URL, password masked', async () => {
    const [port] = (await freePorts(1)) as [number]
    const cache = new RedisResponseCache({ url: `redis://user:s3cret@127.0.0.1:${port}`, startTimeoutMs: 300 })
    const failure = (await cache.start().catch((error: unknown) => error)) as Error
    expect(failure.message).toContain('response cache cannot reach Redis at REDIS_URL=redis://user:***@127.0.0.1')
    expect(failure.message).not.toContain('s3cret')
    await cache.close()
  })

  it('refuses URLs that are not redis:// or rediss://', () => {
    expect(() => new RedisResponseCache({ url: 'http://127.0.0.1:6379' })).toThrow(/redis:\/\//)
  })
})
