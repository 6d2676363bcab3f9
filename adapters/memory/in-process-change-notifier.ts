/**
 * `ChangeNotifier` for a single process (no Redis): `publish` calls every subscriber of the
 * channel synchronously, in subscription order. A handler that throws is logged and skipped; the
 * others still run and `publish` never throws.
 */
import type { ChangeNotifier } from '../../core/ports.js'
import type { HealthStatus, Logger } from '../../core/service.js'

export interface InProcessChangeNotifierOptions {
  /** Receives errors thrown by handlers. */
  readonly logger?: Logger
}

type Handler = (message: string) => void

export class InProcessChangeNotifier implements ChangeNotifier {
  readonly #logger: Logger | null
  readonly #channels = new Map<string, Set<Handler>>()

  constructor(options: InProcessChangeNotifierOptions = {}) {
    this.#logger = options.logger ?? null
  }

  async start(): Promise<void> {}

  /** Forgets every subscriber. */
  async close(): Promise<void> {
    this.#channels.clear()
  }

  async health(): Promise<HealthStatus> {
    return { ok: true }
  }

  publish(channel: string, message: string): void {
    const handlers = this.#channels.get(channel)
    if (handlers === undefined) return
    // A snapshot, so handlers that (un)subscribe while being called do not change this round.
    for (const handler of [...handlers]) {
      try {
        handler(message)
      } catch (error) {
        try {
          this.#logger?.error({ channel, error: error instanceof Error ? error.message : String(error) }, 'change handler failed')
        } catch {
          // A broken logger must not stop the fan-out.
        }
      }
    }
  }

  subscribe(channel: string, handler: (message: string) => void): () => void {
    let handlers = this.#channels.get(channel)
    if (handlers === undefined) {
      handlers = new Set()
      this.#channels.set(channel, handlers)
    }
    // Wrapping makes each subscription distinct, even when the same function subscribes twice.
    const subscription: Handler = (message) => handler(message)
    handlers.add(subscription)
    return () => {
      const current = this.#channels.get(channel)
      if (current === undefined) return
      current.delete(subscription)
      if (current.size === 0) this.#channels.delete(channel)
    }
  }
}
