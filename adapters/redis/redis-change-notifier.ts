/**
 * `ChangeNotifier` over Redis pub/sub, so a change made on one gateway instance reaches every
 * instance (a revoked key stops working everywhere).
 *
 * - Two connections: one publishes, one is a dedicated subscriber (a subscribed RESP2 connection
 *   cannot run other commands). Redis channels are the port's channels with a prefix (`gateway:`
 *   by default), so the gateway shares a server with other applications safely.
 * - `publish` only goes through Redis, and local handlers are called from the subscriber, never
 *   directly: every instance, the publisher included, receives each message exactly once, in
 *   publish order. Delivery is therefore asynchronous. A publish made while the publisher
 *   connection is down waits in ioredis's offline queue and goes out on reconnect.
 * - Handlers are called in subscription order; one that throws is logged and skipped.
 * - Reconnects: ioredis reconnects both connections by itself. Messages published while the
 *   subscriber was disconnected are lost (pub/sub has no history), and a lost revocation would
 *   leave a revoked key cached. So when the subscriber connection comes back after a disconnect,
 *   the notifier re-subscribes every channel and, once Redis confirmed that, delivers `'*'` to every
 *   local handler of every channel, meaning "drop everything you cached". Handlers of every channel
 *   must understand `'*'`.
 * - `health()` is not ok while either connection is not ready (and before `start()`, after
 *   `close()`). `start()` waits until both connections are ready, or fails after
 *   `startTimeoutMs` with an error naming `REDIS_URL` (password masked).
 *
 * Scope: a `redis://` or `rediss://` URL naming one server (a primary, or a proxy in front of one).
 * Redis Cluster is not supported yet: pointing the URL at one cluster node happens to work for
 * classic PUBLISH/SUBSCRIBE (the cluster bus broadcasts them), but does not follow failover; proper
 * support needs ioredis `Cluster` and sharded pub/sub.
 */
import type { Redis } from 'ioredis'
import type { ChangeNotifier } from '../../core/ports.js'
import type { HealthStatus, Logger } from '../../core/service.js'
import { checkRedisUrl, errorMessage, queueingClient, quitRedis, recordErrors, waitReady } from './redis-connection.js'

export { maskRedisUrl } from './redis-connection.js'

export interface RedisChangeNotifierOptions {
  /** `redis://[user:password@]host[:port][/db]` or `rediss://...` (TLS). */
  readonly url: string
  /** Prefix of every Redis channel name; default `gateway:`. */
  readonly channelPrefix?: string
  /** How long `start()` waits for both connections; default 10 s. */
  readonly startTimeoutMs?: number
  /** Name shown in Redis `CLIENT LIST` (`-pub` / `-sub` appended); default `gateway-change-notifier`. */
  readonly connectionName?: string
  /** Receives connection state changes and errors thrown by handlers. */
  readonly logger?: Logger
}

type Handler = (message: string) => void
type Phase = 'idle' | 'starting' | 'running' | 'closed'

const DEFAULT_PREFIX = 'gateway:'
const DEFAULT_START_TIMEOUT_MS = 10_000

export class RedisChangeNotifier implements ChangeNotifier {
  readonly #url: string
  readonly #prefix: string
  readonly #startTimeoutMs: number
  readonly #logger: Logger | null
  readonly #publisher: Redis
  readonly #subscriber: Redis
  readonly #channels = new Map<string, Set<Handler>>()
  #phase: Phase = 'idle'
  /** Set once the subscriber was ready and then lost its connection: the next ready must broadcast `'*'`. */
  #subscriberLost = false
  #lastError: string | null = null

  constructor(options: RedisChangeNotifierOptions) {
    checkRedisUrl(options.url, 'RedisChangeNotifier')
    this.#url = options.url
    this.#prefix = options.channelPrefix ?? DEFAULT_PREFIX
    this.#startTimeoutMs = options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS
    this.#logger = options.logger ?? null
    const name = options.connectionName ?? 'gateway-change-notifier'
    // Queueing clients: a publish made during an outage still reaches the other instances once
    // Redis is back (admin changes are rare, so the queue stays small even in a long outage), and
    // reconnects are quick, since until then this instance may hold stale cache entries.
    this.#publisher = queueingClient(options.url, `${name}-pub`)
    this.#subscriber = queueingClient(options.url, `${name}-sub`, {
      // Classic RESP2 subscriber mode: works on every server version, and operators see the
      // connection as `TYPE pubsub` (CLIENT LIST/KILL, client-output-buffer-limit pubsub).
      protocol: 2,
      // Re-subscribing is done here from this notifier's own registry, so that `'*'` is delivered
      // only after Redis confirmed the subscriptions (see #onSubscriberReady).
      autoResubscribe: false,
    })
    this.#watch(this.#publisher, 'publisher')
    this.#watch(this.#subscriber, 'subscriber')
    this.#subscriber.on('ready', () => void this.#onSubscriberReady())
    this.#subscriber.on('message', (channel: string, message: string) => this.#onMessage(channel, message))
  }

  async start(): Promise<void> {
    if (this.#phase !== 'idle') return
    this.#phase = 'starting'
    try {
      await Promise.all([this.#waitReady(this.#publisher), this.#waitReady(this.#subscriber)])
    } catch (error) {
      this.#phase = 'closed'
      this.#publisher.disconnect()
      this.#subscriber.disconnect()
      throw error
    }
    // Subscriptions made before start() are sent now; later ones are sent as they come.
    const channels = [...this.#channels.keys()].map((channel) => this.#prefix + channel)
    if (channels.length > 0) await this.#subscriber.subscribe(...channels)
    this.#phase = 'running'
  }

  /** Quits both connections and forgets every subscriber. */
  async close(): Promise<void> {
    if (this.#phase === 'closed') return
    this.#phase = 'closed'
    this.#channels.clear()
    await Promise.all([quitRedis(this.#publisher), quitRedis(this.#subscriber)])
  }

  async health(): Promise<HealthStatus> {
    if (this.#phase !== 'running') return { ok: false, detail: this.#phase === 'closed' ? 'closed' : 'not started' }
    const down = [
      ...(this.#publisher.status === 'ready' ? [] : [`publisher ${this.#publisher.status}`]),
      ...(this.#subscriber.status === 'ready' ? [] : [`subscriber ${this.#subscriber.status}`]),
    ]
    if (down.length === 0) return { ok: true }
    return { ok: false, detail: `redis ${down.join(', ')}${this.#lastError === null ? '' : `: ${this.#lastError}`}` }
  }

  publish(channel: string, message: string): void {
    if (this.#phase === 'idle' || this.#phase === 'closed') {
      this.#log('warn', { channel, phase: this.#phase }, 'change notification dropped: notifier not running')
      return
    }
    this.#publisher.publish(this.#prefix + channel, message).catch((error: unknown) => {
      this.#log('error', { channel, error: errorMessage(error) }, 'change notification could not be published')
    })
  }

  subscribe(channel: string, handler: (message: string) => void): () => void {
    let handlers = this.#channels.get(channel)
    if (handlers === undefined) {
      handlers = new Set()
      this.#channels.set(channel, handlers)
      this.#sendSubscription('subscribe', channel)
    }
    // Wrapping makes each subscription distinct, even when the same function subscribes twice.
    const subscription: Handler = (message) => handler(message)
    handlers.add(subscription)
    return () => {
      const current = this.#channels.get(channel)
      if (current === undefined || !current.delete(subscription)) return
      if (current.size === 0) {
        this.#channels.delete(channel)
        this.#sendSubscription('unsubscribe', channel)
      }
    }
  }

  /**
   * Commands go out in call order on the one subscriber connection, so the server ends in the state
   * of the last call per channel. Before start() nothing is sent (start() subscribes everything).
   */
  #sendSubscription(command: 'subscribe' | 'unsubscribe', channel: string): void {
    if (this.#phase === 'idle' || this.#phase === 'closed') return
    this.#subscriber[command](this.#prefix + channel).catch((error: unknown) => {
      // A reconnect re-subscribes from the registry, so a failed command heals on its own.
      this.#log('warn', { channel, command, error: errorMessage(error) }, 'redis subscription command failed')
    })
  }

  #onMessage(redisChannel: string, message: string): void {
    if (!redisChannel.startsWith(this.#prefix)) return
    const channel = redisChannel.slice(this.#prefix.length)
    const handlers = this.#channels.get(channel)
    if (handlers !== undefined) this.#deliver(channel, handlers, message)
  }

  /** Calls a snapshot of the handlers, so (un)subscribing inside a handler does not change this round. */
  #deliver(channel: string, handlers: ReadonlySet<Handler>, message: string): void {
    for (const handler of [...handlers]) {
      try {
        handler(message)
      } catch (error) {
        this.#log('error', { channel, error: errorMessage(error) }, 'change handler failed')
      }
    }
  }

  async #onSubscriberReady(): Promise<void> {
    if (!this.#subscriberLost || this.#phase !== 'running') return
    const channels = [...this.#channels.keys()]
    try {
      if (channels.length > 0) await this.#subscriber.subscribe(...channels.map((channel) => this.#prefix + channel))
    } catch (error) {
      // Lost again before the confirmation: the next ready retries, and still owes the '*'.
      this.#log('warn', { error: errorMessage(error) }, 'redis re-subscribe failed')
      return
    }
    if (this.#phase !== 'running') return
    this.#subscriberLost = false
    this.#log('info', { channels: channels.length }, 'redis change notifications resumed; dropping every cached entry')
    for (const [channel, handlers] of [...this.#channels]) this.#deliver(channel, handlers, '*')
  }

  #watch(client: Redis, role: 'publisher' | 'subscriber'): void {
    let wasReady = false
    recordErrors(client, (message) => {
      this.#lastError = message
    })
    client.on('ready', () => {
      if (wasReady) return
      wasReady = true
      if (this.#phase === 'running') this.#log('info', { role }, 'redis connection restored')
    })
    client.on('close', () => {
      if (!wasReady) return
      wasReady = false
      if (role === 'subscriber') this.#subscriberLost = true
      if (this.#phase === 'running') this.#log('warn', { role, error: this.#lastError }, 'redis connection lost; reconnecting')
    })
  }

  /** Resolves when `client` is ready; rejects after the start timeout with a secret-free message. */
  #waitReady(client: Redis): Promise<void> {
    return waitReady(client, { url: this.#url, timeoutMs: this.#startTimeoutMs, subject: '', lastError: () => this.#lastError })
  }

  #log(level: 'info' | 'warn' | 'error', fields: object, message: string): void {
    try {
      this.#logger?.[level](fields, message)
    } catch {
      // A broken logger must not break delivery.
    }
  }
}
