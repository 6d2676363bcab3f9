import { describe, expect, it, vi } from 'vitest'
import { InProcessChangeNotifier } from '../../adapters/memory/in-process-change-notifier.js'
import type { Logger } from '../../core/service.js'
import { describeChangeNotifierContract } from './change-notifier.contract.js'

describeChangeNotifierContract('in-process', async () => {
  const notifier = new InProcessChangeNotifier()
  await notifier.start()
  return notifier
})

describe('InProcessChangeNotifier', () => {
  it('delivers synchronously, before publish returns', () => {
    const notifier = new InProcessChangeNotifier()
    const seen: string[] = []
    notifier.subscribe('keys', (message) => seen.push(message))
    notifier.publish('keys', 'revoked')
    expect(seen).toEqual(['revoked'])
  })

  it('logs a throwing handler and still calls the later ones', () => {
    const logger: Logger = { debug: vi.fn(), info: vi.fn(), warn: vi.fn(), error: vi.fn() }
    const notifier = new InProcessChangeNotifier({ logger })
    const seen: string[] = []
    notifier.subscribe('keys', () => {
      throw new Error('boom')
    })
    notifier.subscribe('keys', (message) => seen.push(message))
    notifier.publish('keys', 'x')
    expect(seen).toEqual(['x'])
    expect(logger.error).toHaveBeenCalledWith(expect.objectContaining({ channel: 'keys', error: 'boom' }), expect.any(String))
  })

  it('treats the same function subscribed twice as two subscriptions', () => {
    const notifier = new InProcessChangeNotifier()
    const seen: string[] = []
    const handler = (message: string): void => void seen.push(message)
    const unsubscribeFirst = notifier.subscribe('keys', handler)
    notifier.subscribe('keys', handler)
    notifier.publish('keys', 'a')
    unsubscribeFirst()
    notifier.publish('keys', 'b')
    expect(seen).toEqual(['a', 'a', 'b'])
  })

  it('runs a publish round on the subscribers present when it started', () => {
    const notifier = new InProcessChangeNotifier()
    const seen: string[] = []
    notifier.subscribe('keys', () => {
      notifier.subscribe('keys', (message) => seen.push(`late:${message}`))
    })
    notifier.publish('keys', 'first')
    expect(seen).toEqual([])
    notifier.publish('keys', 'second')
    expect(seen).toEqual(['late:second'])
  })

  it('forgets subscribers on close', async () => {
    const notifier = new InProcessChangeNotifier()
    const seen: string[] = []
    notifier.subscribe('keys', (message) => seen.push(message))
    await notifier.close()
    notifier.publish('keys', 'x')
    expect(seen).toEqual([])
  })
})
