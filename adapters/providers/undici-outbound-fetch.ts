/**
 * `OutboundFetch` on undici: `fetch` through an agent of its own whose connections resolve host
 * names with the custom-host connect policy (`guardedLookup`), so a configured URL (a JWKS URL) whose
 * name re-resolves to a refused address after it was checked is never reached. Redirects are what
 * the caller asks (jose asks for none). `close()` closes the agent's connections.
 */
import { Agent, fetch as undiciFetch } from 'undici'
import type { OutboundFetch } from '../../core/ports.js'
import type { HealthStatus } from '../../core/service.js'
import { guardedLookup } from './upstream-client.js'

export interface UndiciOutboundFetchOptions {
  /** Whether the gateway may connect to `address`, reached by resolving `hostname`. */
  readonly isAddressAllowed: (address: string, hostname: string) => boolean
  readonly connectTimeoutMs?: number
}

export class UndiciOutboundFetch implements OutboundFetch {
  readonly #agent: Agent
  readonly fetch: typeof globalThis.fetch

  constructor(options: UndiciOutboundFetchOptions) {
    this.#agent = new Agent({ connect: { timeout: options.connectTimeoutMs ?? 10_000, lookup: guardedLookup(options.isAddressAllowed) } })
    const agent = this.#agent
    // Node's global fetch is undici's; its Request and Response types differ only in name.
    this.fetch = ((input: unknown, init?: unknown) =>
      undiciFetch(input as Parameters<typeof undiciFetch>[0], { ...(init as Parameters<typeof undiciFetch>[1]), dispatcher: agent })) as unknown as typeof globalThis.fetch
  }

  async start(): Promise<void> {}

  async close(): Promise<void> {
    await this.#agent.close()
  }

  async health(): Promise<HealthStatus> {
    return { ok: true }
  }
}
