/**
 * The `ChangeNotifier` contract, asserted through the port only. Delivery may be asynchronous
 * (Redis pub/sub), so the suite waits for messages instead of expecting them synchronously, and
 * proves a message was *not* delivered by waiting for a later one on the same channel.
 *
 * `makeNotifier` must return a started notifier; the suite closes it after each test.
 */
import { randomUUID } from 'node:crypto'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import type { ChangeNotifier } from '../../core/ports.js'

const PROBE = '__probe__'
const WAIT = { timeout: 5_000, interval: 10 }

/** A handler that records real messages (probes ignored). */
function recorder(): { messages: string[]; handler: (message: string) => void } {
  const messages: string[] = []
  return { messages, handler: (message) => (message.startsWith(PROBE) ? undefined : void messages.push(message)) }
}

/** Resolves once `channel` delivers on this notifier, so subscriptions made before it are live. */
async function ready(notifier: ChangeNotifier, channel: string): Promise<void> {
  let seen = false
  const unsubscribe = notifier.subscribe(channel, (message) => {
    if (message.startsWith(PROBE)) seen = true
  })
  try {
    await vi.waitFor(() => {
      if (!seen) notifier.publish(channel, PROBE)
      expect(seen).toBe(true)
    }, WAIT)
  } finally {
    unsubscribe()
  }
}

/** Registers the contract suite for one `ChangeNotifier` implementation. */
export function describeChangeNotifierContract(name: string, makeNotifier: () => Promise<ChangeNotifier>): void {
  describe(`ChangeNotifier contract: ${name}`, () => {
    let notifier: ChangeNotifier
    let channel: string

    beforeEach(async () => {
      notifier = await makeNotifier()
      channel = `test:${randomUUID()}`
    })

    afterEach(async () => {
      await notifier.close()
    })

    it('reports healthy once started', async () => {
      expect((await notifier.health()).ok).toBe(true)
    })

    it('delivers every message to every subscriber of the channel, in publish order', async () => {
      const first = recorder()
      const second = recorder()
      notifier.subscribe(channel, first.handler)
      notifier.subscribe(channel, second.handler)
      await ready(notifier, channel)

      notifier.publish(channel, 'key:revoked:1')
      notifier.publish(channel, 'key:revoked:2')
      await vi.waitFor(() => expect(first.messages).toEqual(['key:revoked:1', 'key:revoked:2']), WAIT)
      await vi.waitFor(() => expect(second.messages).toEqual(['key:revoked:1', 'key:revoked:2']), WAIT)
    })

    it('does not deliver messages of other channels', async () => {
      const other = `test:${randomUUID()}`
      const mine = recorder()
      notifier.subscribe(channel, mine.handler)
      await ready(notifier, channel)

      notifier.publish(other, 'not for you')
      notifier.publish(channel, 'for you')
      await vi.waitFor(() => expect(mine.messages).toEqual(['for you']), WAIT)
    })

    it('stops delivering after unsubscribe, while other subscribers keep receiving', async () => {
      const leaving = recorder()
      const staying = recorder()
      const unsubscribe = notifier.subscribe(channel, leaving.handler)
      notifier.subscribe(channel, staying.handler)
      await ready(notifier, channel)

      notifier.publish(channel, 'before')
      await vi.waitFor(() => expect(leaving.messages).toEqual(['before']), WAIT)
      unsubscribe()
      unsubscribe()
      notifier.publish(channel, 'after')
      await vi.waitFor(() => expect(staying.messages).toEqual(['before', 'after']), WAIT)
      expect(leaving.messages).toEqual(['before'])
    })

    it('keeps delivering to the others when a handler throws', async () => {
      const healthy = recorder()
      notifier.subscribe(channel, () => {
        throw new Error('handler bug')
      })
      notifier.subscribe(channel, healthy.handler)
      await ready(notifier, channel)

      expect(() => notifier.publish(channel, 'still delivered')).not.toThrow()
      await vi.waitFor(() => expect(healthy.messages).toEqual(['still delivered']), WAIT)
    })
  })
}
