import { randomUUID } from 'node:crypto'
import { createConnection, createServer, type AddressInfo, type Server, type Socket } from 'node:net'
import { Redis } from 'ioredis'
import { afterAll, afterEach, beforeAll, describe, expect, inject, it, vi } from 'vitest'
import { RedisChangeNotifier, maskRedisUrl, type RedisChangeNotifierOptions } from '../../adapters/redis/redis-change-notifier.js'
import type { ChangeNotifier } from '../../core/ports.js'
import { describeChangeNotifierContract } from './change-notifier.contract.js'

const WAIT = { timeout: 10_000, interval: 10 }
const PROBE = '__probe__'

describeChangeNotifierContract('redis', async () => {
  const notifier = new RedisChangeNotifier({ url: inject('redisUrl') })
  await notifier.start()
  return notifier
})

/** Records the messages a subscription receives, probes apart. */
function recorder(): { messages: string[]; handler: (message: string) => void } {
  const messages: string[] = []
  return { messages, handler: (message) => (message.startsWith(PROBE) ? undefined : void messages.push(message)) }
}

/** Resolves once a message published on `from` reaches `to` on `channel`: `to`'s subscriptions are live. */
async function linked(from: ChangeNotifier, to: ChangeNotifier, channel: string): Promise<void> {
  let seen = false
  const unsubscribe = to.subscribe(channel, (message) => {
    if (message.startsWith(PROBE)) seen = true
  })
  try {
    await vi.waitFor(() => {
      if (!seen) from.publish(channel, PROBE)
      expect(seen).toBe(true)
    }, WAIT)
  } finally {
    unsubscribe()
  }
}

/** The id of the connection named `name`, found among the server's pub/sub clients. */
async function pubsubClientId(admin: Redis, name: string): Promise<string | null> {
  const list = (await admin.call('CLIENT', 'LIST', 'TYPE', 'pubsub')) as string
  const line = list.split('\n').find((entry) => entry.includes(` name=${name} `))
  return line?.match(/^id=(\d+) /)?.[1] ?? null
}

/** A TCP proxy in front of Redis that can cut every connection and refuse new ones, then heal. */
async function startProxy(target: URL): Promise<{ url: string; cut(): void; heal(): void; close(): Promise<void> }> {
  const sockets = new Set<Socket>()
  let down = false
  const server: Server = createServer((client) => {
    if (down) return void client.destroy()
    const upstream = createConnection({ host: target.hostname, port: Number(target.port || 6379) })
    for (const socket of [client, upstream]) {
      sockets.add(socket)
      socket.on('close', () => sockets.delete(socket))
      socket.on('error', () => {})
    }
    client.pipe(upstream).pipe(client)
    client.on('close', () => upstream.destroy())
    upstream.on('close', () => client.destroy())
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `redis://127.0.0.1:${port}`,
    cut() {
      down = true
      for (const socket of sockets) socket.destroy()
    },
    heal() {
      down = false
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy()
        server.close(() => resolve())
      }),
  }
}

describe('RedisChangeNotifier', () => {
  const opened: RedisChangeNotifier[] = []
  let admin: Redis

  async function started(options: Partial<RedisChangeNotifierOptions> = {}): Promise<RedisChangeNotifier> {
    const notifier = new RedisChangeNotifier({ url: inject('redisUrl'), ...options })
    opened.push(notifier)
    await notifier.start()
    return notifier
  }

  beforeAll(() => {
    admin = new Redis(inject('redisUrl'), { lazyConnect: true, maxRetriesPerRequest: 1 })
  })

  afterEach(async () => {
    await Promise.all(opened.splice(0).map((notifier) => notifier.close()))
  })

  afterAll(async () => {
    await admin.quit()
  })

  it('delivers a publish on one instance once to the subscribers of every instance, the publisher included', async () => {
    const a = await started()
    const b = await started()
    const channel = `test:${randomUUID()}`
    const onA = recorder()
    const onB = recorder()
    a.subscribe(channel, onA.handler)
    b.subscribe(channel, onB.handler)
    await linked(a, a, channel)
    await linked(a, b, channel)

    a.publish(channel, 'a:1')
    a.publish(channel, 'a:2')
    a.publish(channel, 'a:end')
    b.publish(channel, 'b:1')
    b.publish(channel, 'b:end')
    // Each instance saw both publishers' last messages, so a duplicate of an earlier one would have arrived too.
    for (const seen of [onA, onB]) {
      await vi.waitFor(() => expect(seen.messages).toEqual(expect.arrayContaining(['a:end', 'b:end'])), WAIT)
      // Two publishers' messages interleave in any order; each publisher's own stay in order.
      expect(seen.messages.filter((message) => message.startsWith('a:'))).toEqual(['a:1', 'a:2', 'a:end'])
      expect(seen.messages.filter((message) => message.startsWith('b:'))).toEqual(['b:1', 'b:end'])
      expect(seen.messages).toHaveLength(5)
    }
  })

  it('uses prefixed Redis channels', async () => {
    const notifier = await started()
    const channel = `test:${randomUUID()}`
    const mine = recorder()
    notifier.subscribe(channel, mine.handler)
    await linked(notifier, notifier, channel)

    await admin.publish(channel, 'unprefixed')
    await admin.publish(`gateway:${channel}`, 'prefixed')
    await vi.waitFor(() => expect(mine.messages).toEqual(['prefixed']), WAIT)
  })

  it('subscribes what was subscribed before start()', async () => {
    const notifier = new RedisChangeNotifier({ url: inject('redisUrl') })
    opened.push(notifier)
    const channel = `test:${randomUUID()}`
    const early = recorder()
    notifier.subscribe(channel, early.handler)
    await notifier.start()

    await admin.publish(`gateway:${channel}`, 'hello')
    await vi.waitFor(() => expect(early.messages).toEqual(['hello']), WAIT)
  })

  it('after its pub/sub connection is killed: reconnects, re-subscribes and tells every handler of every channel "*"', async () => {
    const connectionName = `gw-test-${randomUUID()}`
    const notifier = await started({ connectionName })
    const publisher = await started()
    const keys = `test:${randomUUID()}`
    const workspaces = `test:${randomUUID()}`
    const onKeys = recorder()
    const onKeysToo = recorder()
    const onWorkspaces = recorder()
    notifier.subscribe(keys, onKeys.handler)
    notifier.subscribe(keys, onKeysToo.handler)
    notifier.subscribe(workspaces, onWorkspaces.handler)
    await linked(publisher, notifier, keys)
    await linked(publisher, notifier, workspaces)

    // `CLIENT KILL TYPE pubsub`, narrowed to this notifier's connection: the Redis server may be
    // shared with other test runs, whose subscribers must survive.
    const id = await pubsubClientId(admin, `${connectionName}-sub`)
    expect(id).not.toBeNull()
    expect(await admin.call('CLIENT', 'KILL', 'ID', id as string, 'TYPE', 'pubsub')).toBe(1)

    await vi.waitFor(() => expect(onKeys.messages).toEqual(['*']), WAIT)
    expect(onKeysToo.messages).toEqual(['*'])
    expect(onWorkspaces.messages).toEqual(['*'])
    expect(await notifier.health()).toEqual({ ok: true })

    // Re-subscribed: new messages flow again, and the '*' came only once.
    publisher.publish(keys, 'after')
    publisher.publish(workspaces, 'after')
    await vi.waitFor(() => expect(onKeys.messages).toEqual(['*', 'after']), WAIT)
    await vi.waitFor(() => expect(onWorkspaces.messages).toEqual(['*', 'after']), WAIT)
    expect(onKeysToo.messages).toEqual(['*', 'after'])
  })

  it('reports unhealthy while Redis is unreachable, and covers the messages it missed with "*" once back', async () => {
    const proxy = await startProxy(new URL(inject('redisUrl')))
    try {
      const cutOff = await started({ url: proxy.url })
      const other = await started()
      const channel = `test:${randomUUID()}`
      const seen = recorder()
      cutOff.subscribe(channel, seen.handler)
      await linked(other, cutOff, channel)

      proxy.cut()
      await vi.waitFor(async () => {
        const health = await cutOff.health()
        expect(health.ok).toBe(false)
        expect(health.detail).toMatch(/subscriber/)
      }, WAIT)
      other.publish(channel, 'revoked while you were away')
      await linked(other, other, channel)

      proxy.heal()
      await vi.waitFor(() => expect(seen.messages).toEqual(['*']), WAIT)
      await vi.waitFor(async () => expect(await cutOff.health()).toEqual({ ok: true }), WAIT)
      other.publish(channel, 'live again')
      await vi.waitFor(() => expect(seen.messages).toEqual(['*', 'live again']), WAIT)
    } finally {
      await Promise.all(opened.splice(0).map((notifier) => notifier.close()))
      await proxy.close()
    }
  })

  it('reports unhealthy before start() and after close()', async () => {
    const notifier = new RedisChangeNotifier({ url: inject('redisUrl') })
    opened.push(notifier)
    expect((await notifier.health()).ok).toBe(false)
    await notifier.start()
    expect(await notifier.health()).toEqual({ ok: true })
    await notifier.close()
    expect((await notifier.health()).ok).toBe(false)
    expect(() => notifier.publish('x', 'after close')).not.toThrow()
  })

  it('fails start() after its timeout with an error naming REDIS_URL, password masked', async () => {
    const closed = createServer()
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve))
    const { port } = closed.address() as AddressInfo
    await new Promise<void>((resolve) => closed.close(() => resolve()))

    const notifier = new RedisChangeNotifier({ url: `redis://gateway:s3cret-pw@127.0.0.1:${port}/2`, startTimeoutMs: 200 })
    opened.push(notifier)
    const failure = await notifier.start().then(
      () => null,
      (error: unknown) => error as Error,
    )
    expect(failure?.message).toContain(`REDIS_URL=redis://gateway:***@127.0.0.1:${port}/2`)
    expect(failure?.message).not.toContain('s3cret-pw')
    expect((await notifier.health()).ok).toBe(false)
  })

  it('refuses URLs that are not redis:// or rediss://', () => {
    expect(() => new RedisChangeNotifier({ url: 'http://127.0.0.1:6379' })).toThrow(/redis:\/\//)
  })

  it('masks only the password of a URL', () => {
    expect(maskRedisUrl('rediss://user:pw@host:6380/1')).toBe('rediss://user:***@host:6380/1')
    expect(maskRedisUrl('redis://host')).toBe('redis://host')
  })
})
