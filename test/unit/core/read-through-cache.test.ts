/**
 * core/read-through-cache.ts: freshness (positive and negative), one load per key, the bound,
 * stale on error, and loads detached by evictions. Loads are deferred promises settled by hand, so
 * every ordering is deterministic (no timers, no timing thresholds).
 */
import { describe, expect, it } from 'vitest'
import { ReadThroughCache, ttlFreshness, type ReadThroughCacheOptions } from '../../../core/read-through-cache.js'

interface Deferred<T> {
  readonly promise: Promise<T>
  resolve(value: T): void
  reject(error: unknown): void
}

function deferred<T>(): Deferred<T> {
  let resolve!: (value: T) => void
  let reject!: (error: unknown) => void
  const promise = new Promise<T>((res, rej) => {
    resolve = res
    reject = rej
  })
  return { promise, resolve, reject }
}

/** A loader whose calls are recorded and answered by hand, in order. */
class Loader<V> {
  readonly calls: string[] = []
  readonly pending: Array<Deferred<V>> = []
  readonly fn = (key: string): Promise<V> => {
    this.calls.push(key)
    const call = deferred<V>()
    this.pending.push(call)
    return call.promise
  }
  /** The `index`-th call (0 first). */
  call(index: number): Deferred<V> {
    const call = this.pending[index]
    if (call === undefined) throw new Error(`no call ${index}`)
    return call
  }
}

const clock = { at: 1_000, now: () => clock.at }

function cache<V>(options: Partial<ReadThroughCacheOptions<V>> = {}): ReadThroughCache<string, V> {
  return new ReadThroughCache<string, V>({ maxEntries: 100, freshUntil: ttlFreshness(1_000, 100), staleOnError: null, clock, ...options })
}

describe('ReadThroughCache', () => {
  it('answers a kept value only while it is fresh, synchronously; a miss is undefined', async () => {
    clock.at = 1_000
    const c = cache<string | null>()
    const loader = new Loader<string | null>()
    expect(c.get('a', 1_000)).toBeUndefined()
    const loading = c.load('a', loader.fn)
    clock.at = 1_500 // freshness starts when the load settles
    loader.call(0).resolve('A')
    expect(await loading).toBe('A')
    expect(c.get('a', 1_500)).toBe('A')
    expect(c.get('a', 2_499)).toBe('A')
    expect(c.get('a', 2_500)).toBeUndefined()
    // Past its freshness it is still kept (for stale-on-error), until evicted or bounded out.
    expect(c.peek('a')).toBe('A')
    expect(c.size).toBe(1)
  })

  it('keeps "not found" (null) for the negative TTL only', async () => {
    clock.at = 1_000
    const c = cache<string | null>()
    const loader = new Loader<string | null>()
    const loading = c.load('missing', loader.fn)
    loader.call(0).resolve(null)
    expect(await loading).toBeNull()
    expect(c.get('missing', 1_099)).toBeNull()
    expect(c.get('missing', 1_100)).toBeUndefined()
  })

  it('does not keep a value whose freshness ends at once, and drops the older entry of its key', async () => {
    clock.at = 1_000
    const c = cache<{ ok: boolean }>({ freshUntil: (value, now) => (value.ok ? now + 1_000 : now) })
    const loader = new Loader<{ ok: boolean }>()
    const first = c.load('k', loader.fn)
    loader.call(0).resolve({ ok: true })
    await first
    clock.at = 5_000
    const second = c.load('k', loader.fn)
    loader.call(1).resolve({ ok: false })
    expect(await second).toEqual({ ok: false })
    expect(c.peek('k')).toBeUndefined()
    expect(c.size).toBe(0)
  })

  it('makes one loader call for concurrent loads of one key, and one per key', async () => {
    clock.at = 1_000
    const c = cache<string>()
    const loader = new Loader<string>()
    const joined = [c.load('a', loader.fn), c.load('a', loader.fn), c.load('b', loader.fn), c.load('a', loader.fn)]
    expect(loader.calls).toEqual(['a', 'b'])
    loader.call(0).resolve('A')
    loader.call(1).resolve('B')
    expect(await Promise.all(joined)).toEqual(['A', 'A', 'B', 'A'])
    // Once settled, a later load (say, after the entry went stale) calls the loader again.
    const again = c.load('a', loader.fn)
    expect(loader.calls).toEqual(['a', 'b', 'a'])
    loader.call(2).resolve('A2')
    expect(await again).toBe('A2')
    expect(c.get('a', clock.at)).toBe('A2')
  })

  it('stays bounded, dropping the entry loaded longest ago', async () => {
    clock.at = 1_000
    const c = cache<string>({ maxEntries: 2 })
    const put = async (key: string, value: string): Promise<void> => {
      const loader = new Loader<string>()
      const loading = c.load(key, loader.fn)
      loader.call(0).resolve(value)
      await loading
    }
    await put('a', 'A')
    await put('b', 'B')
    await put('a', 'A2') // reloaded: now the newest
    await put('c', 'C')
    expect(c.size).toBe(2)
    expect(c.peek('b')).toBeUndefined()
    expect(c.get('a', clock.at)).toBe('A2')
    expect(c.get('c', clock.at)).toBe('C')
  })

  it('answers a failed load with the stale entry when staleOnError is set, telling it once', async () => {
    clock.at = 1_000
    const told: unknown[] = []
    const c = cache<string>({ staleOnError: (error) => void told.push(error) })
    const loader = new Loader<string>()
    const first = c.load('a', loader.fn)
    loader.call(0).resolve('A')
    await first
    clock.at = 10_000
    expect(c.get('a', clock.at)).toBeUndefined()
    const down = new Error('store down')
    const joined = [c.load('a', loader.fn), c.load('a', loader.fn)]
    loader.call(1).reject(down)
    expect(await Promise.all(joined)).toEqual(['A', 'A'])
    expect(told).toEqual([down])
    // The stale entry is not made fresh again: the next request asks the store again.
    expect(c.get('a', clock.at)).toBeUndefined()
    const next = c.load('a', loader.fn)
    expect(loader.calls).toEqual(['a', 'a', 'a'])
    loader.call(2).resolve('A3')
    expect(await next).toBe('A3')
  })

  it('rejects a failed load for every caller when nothing is kept, or when staleOnError is null, and keeps nothing', async () => {
    clock.at = 1_000
    const told: unknown[] = []
    const withStale = cache<string>({ staleOnError: (error) => void told.push(error) })
    const loader = new Loader<string>()
    const joined = [withStale.load('a', loader.fn), withStale.load('a', loader.fn)]
    loader.call(0).reject(new Error('store down'))
    for (const outcome of await Promise.allSettled(joined)) expect(outcome).toMatchObject({ status: 'rejected', reason: { message: 'store down' } })
    expect(told).toEqual([])
    expect(withStale.size).toBe(0)

    const noStale = cache<string>()
    const fill = noStale.load('a', loader.fn)
    loader.call(1).resolve('A')
    await fill
    clock.at = 10_000
    const failing = noStale.load('a', loader.fn)
    loader.call(2).reject(new Error('store down'))
    await expect(failing).rejects.toThrow('store down')
  })

  it('turns a loader that throws synchronously into a rejected load', async () => {
    const c = cache<string>()
    await expect(
      c.load('a', () => {
        throw new Error('bug')
      }),
    ).rejects.toThrow('bug')
    // Nothing left in flight: the next load calls its loader.
    const loader = new Loader<string>()
    const next = c.load('a', loader.fn)
    loader.call(0).resolve('A')
    expect(await next).toBe('A')
  })

  it('evict(key): the load in flight answers its callers but is not kept, and later callers start their own', async () => {
    clock.at = 1_000
    const c = cache<string>()
    const loader = new Loader<string>()
    const before = c.load('a', loader.fn)
    c.evict('a') // a change notice while the store read runs
    const after = c.load('a', loader.fn)
    expect(loader.calls).toEqual(['a', 'a'])
    // The newer load answers first and is kept; the older one settling later must not replace it.
    loader.call(1).resolve('new')
    expect(await after).toBe('new')
    loader.call(0).resolve('old')
    expect(await before).toBe('old')
    expect(c.get('a', clock.at)).toBe('new')
  })

  it('evict(key): a detached load settling does not detach the newer load of the same key', async () => {
    clock.at = 1_000
    const c = cache<string>()
    const loader = new Loader<string>()
    const before = c.load('a', loader.fn)
    c.evict('a')
    const after = c.load('a', loader.fn)
    loader.call(0).resolve('old')
    await before
    // Still in flight and still shared: this joins the newer load.
    const joined = c.load('a', loader.fn)
    expect(loader.calls).toEqual(['a', 'a'])
    loader.call(1).resolve('new')
    expect(await Promise.all([after, joined])).toEqual(['new', 'new'])
  })

  it('evict(key) leaves other keys and their loads alone', async () => {
    clock.at = 1_000
    const c = cache<string>()
    const loader = new Loader<string>()
    const b = c.load('b', loader.fn)
    c.evict('a')
    const joined = c.load('b', loader.fn)
    expect(loader.calls).toEqual(['b'])
    loader.call(0).resolve('B')
    expect(await Promise.all([b, joined])).toEqual(['B', 'B'])
    expect(c.get('b', clock.at)).toBe('B')
  })

  it('evictWhere drops matching entries and detaches every load in flight, matching or not', async () => {
    clock.at = 1_000
    const c = cache<string>()
    const loader = new Loader<string>()
    for (const key of ['keep', 'drop']) {
      const loading = c.load(key, loader.fn)
      loader.pending.at(-1)?.resolve(key.toUpperCase())
      await loading
    }
    const running = c.load('other', loader.fn)
    c.evictWhere((value) => value === 'DROP')
    expect(c.get('keep', clock.at)).toBe('KEEP')
    expect(c.peek('drop')).toBeUndefined()
    // Which record the running load returns is unknown: it is detached too.
    const later = c.load('other', loader.fn)
    expect(loader.calls).toEqual(['keep', 'drop', 'other', 'other'])
    loader.call(2).resolve('OTHER-OLD')
    expect(await running).toBe('OTHER-OLD')
    expect(c.peek('other')).toBeUndefined()
    loader.call(3).resolve('OTHER-NEW')
    expect(await later).toBe('OTHER-NEW')
    expect(c.get('other', clock.at)).toBe('OTHER-NEW')
  })

  it('clear drops everything and detaches every load', async () => {
    clock.at = 1_000
    const c = cache<string>()
    const loader = new Loader<string>()
    const filled = c.load('a', loader.fn)
    loader.call(0).resolve('A')
    await filled
    const running = c.load('b', loader.fn)
    c.clear()
    expect(c.size).toBe(0)
    loader.call(1).resolve('B')
    expect(await running).toBe('B')
    expect(c.peek('b')).toBeUndefined()
  })

  it('a detached load that fails does not fall back to the evicted entry', async () => {
    clock.at = 1_000
    const told: unknown[] = []
    const c = cache<string>({ staleOnError: (error) => void told.push(error) })
    const loader = new Loader<string>()
    const filled = c.load('a', loader.fn)
    loader.call(0).resolve('revoked')
    await filled
    clock.at = 10_000
    const running = c.load('a', loader.fn)
    c.evict('a')
    loader.call(1).reject(new Error('store down'))
    await expect(running).rejects.toThrow('store down')
    expect(told).toEqual([])
  })

  it('answers a stale entry even when the logger told about it throws', async () => {
    clock.at = 1_000
    const c = cache<string>({
      staleOnError: () => {
        throw new Error('logger broken')
      },
    })
    const loader = new Loader<string>()
    const filled = c.load('a', loader.fn)
    loader.call(0).resolve('A')
    await filled
    clock.at = 10_000
    const failing = c.load('a', loader.fn)
    loader.call(1).reject(new Error('store down'))
    expect(await failing).toBe('A')
  })

  it('refuses a bound below 1', () => {
    expect(() => cache({ maxEntries: 0 })).toThrow(/maxEntries/)
  })
})
