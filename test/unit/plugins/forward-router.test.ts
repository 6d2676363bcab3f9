/**
 * The router's pure pieces: weighted picks (deterministic for a given draw, weight-0 targets never
 * picked) and the primed stream that lets a config-routed stream fall back until its first chunk
 * (replays what it read, nothing lost or doubled, errors and early ends reported before any byte).
 */
import { describe, expect, it } from 'vitest'
import type { ByteStream } from '../../../core/ports.js'
import { PrimedStream } from '../../../plugins/forward/primed-stream.js'
import { pickWeighted } from '../../../plugins/forward/router.js'

describe('pickWeighted', () => {
  it('maps draws onto the weights in order, skipping weight 0', () => {
    const weights = [3, 0, 1]
    expect(pickWeighted(weights, 4, 0)).toBe(0)
    expect(pickWeighted(weights, 4, 0.74)).toBe(0)
    expect(pickWeighted(weights, 4, 0.75)).toBe(2)
    expect(pickWeighted(weights, 4, 0.999999)).toBe(2)
  })

  it('shares picks by weight over evenly spread draws', () => {
    const counts = [0, 0, 0]
    for (let i = 0; i < 1000; i++) counts[pickWeighted([1, 2, 1], 4, i / 1000)]! += 1
    expect(counts).toEqual([250, 500, 250])
  })

  it('a draw that rounds to the top lands on the last weighted target', () => {
    expect(pickWeighted([1, 1, 0], 2, 1)).toBe(1)
  })
})

/** A ByteStream driven by the test. */
class FakeStream implements ByteStream {
  onData: ((chunk: Buffer) => void) | null = null
  onEnd: (() => void) | null = null
  onError: ((error: unknown) => void) | null = null
  paused = false
  destroyed = false
  consume(onData: (chunk: Buffer) => void, onEnd: () => void, onError: (error: unknown) => void): void {
    this.onData = onData
    this.onEnd = onEnd
    this.onError = onError
  }
  pause(): void {
    this.paused = true
  }
  resume(): void {
    this.paused = false
  }
  destroy(): void {
    this.destroyed = true
  }
}

function collect(stream: ByteStream): { chunks: string[]; ended: boolean; error: unknown } {
  const seen = { chunks: [] as string[], ended: false, error: undefined as unknown }
  stream.consume(
    (chunk) => seen.chunks.push(chunk.toString()),
    () => {
      seen.ended = true
    },
    (error) => {
      seen.error = error
    },
  )
  return seen
}

describe('PrimedStream', () => {
  it('settles on the first chunk, keeps what arrives before consume, then replays it and follows the source', async () => {
    const source = new FakeStream()
    const primed = new PrimedStream(source)
    source.onData!(Buffer.from('one'))
    expect(await primed.first).toEqual({ kind: 'data' })
    // A small start does not stop the socket's reads (that costs a restart).
    expect(source.paused).toBe(false)
    // Chunks that still arrive before consume are kept in order.
    source.onData!(Buffer.from('two'))
    const seen = collect(primed)
    expect(source.paused).toBe(false)
    source.onData!(Buffer.from('three'))
    source.onEnd!()
    expect(seen).toEqual({ chunks: ['one', 'two', 'three'], ended: true, error: undefined })
  })

  it('reports an end or an error before any chunk', async () => {
    const ended = new FakeStream()
    const primedEnd = new PrimedStream(ended)
    ended.onEnd!()
    expect(await primedEnd.first).toEqual({ kind: 'end' })

    const failed = new FakeStream()
    const primedError = new PrimedStream(failed)
    const problem = new Error('reset')
    failed.onError!(problem)
    expect(await primedError.first).toEqual({ kind: 'error', error: problem })
  })

  it('an error after the first chunk reaches the consumer after the replayed chunk', async () => {
    const source = new FakeStream()
    const primed = new PrimedStream(source)
    source.onData!(Buffer.from('one'))
    await primed.first
    const problem = new Error('cut')
    source.onError!(problem)
    expect(collect(primed)).toEqual({ chunks: ['one'], ended: false, error: problem })
  })

  it('pauses the source when more than 64 KiB pile up before consume, resumes it on consume; destroy releases it', async () => {
    const source = new FakeStream()
    const primed = new PrimedStream(source)
    source.onData!(Buffer.alloc(40_000))
    await primed.first
    expect(source.paused).toBe(false)
    source.onData!(Buffer.alloc(40_000))
    expect(source.paused).toBe(true)
    // resume before consume keeps it paused: the chunks would only pile up.
    primed.resume()
    expect(source.paused).toBe(true)
    const seen = collect(primed)
    expect(seen.chunks).toHaveLength(2)
    expect(source.paused).toBe(false)
    primed.destroy()
    expect(source.destroyed).toBe(true)
  })
})
