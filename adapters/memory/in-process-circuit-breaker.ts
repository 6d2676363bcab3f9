/**
 * `CircuitBreaker` in process: the embedded default when no `REDIS_URL` is set. The semantics are
 * the port's (core/ports.ts): closed → open after `failureThreshold` failures in a row → half-open
 * after `cooldownMs`, one probe → closed on its success, open again on its failure. Circuits hold
 * per process only: several gateway processes need Redis to share them.
 *
 * State lives in one `Map`, so every call is atomic by construction and `allow` never returns a
 * Promise. A circuit that is closed with no failures counted is not stored at all (absent reads as
 * closed), so healthy targets cost nothing; at most `maxCircuits` circuits are kept, the one whose
 * last failure or state change is oldest dropped first (it then reads as closed: traffic flows).
 */
import type { CircuitBreaker, CircuitSetting } from '../../core/ports.js'
import type { HealthStatus } from '../../core/service.js'

/** A stored circuit. `openUntil` 0: closed. */
export interface CircuitState {
  /** Failures in a row while closed. */
  failures: number
  /** Epoch ms the cool-down ends (0 while closed). */
  openUntil: number
  /** Epoch ms a claimed probe's claim ends (0: no probe out). */
  probeUntil: number
}

export interface InProcessCircuitBreakerOptions {
  /** Most circuits kept in memory; default 10 000. */
  readonly maxCircuits?: number
}

const DEFAULT_MAX_CIRCUITS = 10_000

export class InProcessCircuitBreaker implements CircuitBreaker {
  readonly #circuits = new Map<string, CircuitState>()
  readonly #maxCircuits: number

  constructor(options: InProcessCircuitBreakerOptions = {}) {
    this.#maxCircuits = Math.max(1, options.maxCircuits ?? DEFAULT_MAX_CIRCUITS)
  }

  async start(): Promise<void> {}

  async close(): Promise<void> {
    this.#circuits.clear()
  }

  async health(): Promise<HealthStatus> {
    return { ok: true }
  }

  /** Number of circuits held (tests and diagnostics). */
  get size(): number {
    return this.#circuits.size
  }

  /** A copy of a circuit's state, `undefined` when closed with no failures (tests and diagnostics). */
  peek(key: string): CircuitState | undefined {
    const state = this.#circuits.get(key)
    return state === undefined ? undefined : { ...state }
  }

  allow(key: string, setting: CircuitSetting, now: number): boolean {
    // No circuit failing at all (the usual case): not even the key's hash is computed.
    if (this.#circuits.size === 0) return true
    const state = this.#circuits.get(key)
    if (state === undefined || state.openUntil === 0) return true
    if (now < state.openUntil || now < state.probeUntil) return false
    state.probeUntil = now + setting.cooldownMs
    return true
  }

  record(key: string, setting: CircuitSetting, success: boolean, now: number): void {
    if (success && this.#circuits.size === 0) return
    const state = this.#circuits.get(key)
    if (success) {
      // Closed with failures, or a half-open probe (or any attempt) succeeding: closed, count 0.
      // While open, a straggler's success says nothing about the target now.
      if (state !== undefined && (state.openUntil === 0 || now >= state.openUntil)) this.#circuits.delete(key)
      return
    }
    if (state === undefined) {
      this.#store(key, { failures: 0, openUntil: 0, probeUntil: 0 }, setting, now)
      return
    }
    if (state.openUntil !== 0 && now < state.openUntil) return
    this.#circuits.delete(key)
    this.#store(key, state, setting, now)
  }

  /** Counts one failure on `state` (closed, or half-open: reopens) and stores it as the newest circuit. */
  #store(key: string, state: CircuitState, setting: CircuitSetting, now: number): void {
    if (state.openUntil !== 0 || state.failures + 1 >= setting.failureThreshold) {
      state.failures = 0
      state.openUntil = now + setting.cooldownMs
      state.probeUntil = 0
    } else {
      state.failures += 1
    }
    this.#circuits.set(key, state)
    if (this.#circuits.size > this.#maxCircuits) {
      const oldest = this.#circuits.keys().next().value as string
      this.#circuits.delete(oldest)
    }
  }
}
