/**
 * Store reads behind the auth caches (API keys, organisations, workspaces), one per key at a time.
 *
 * - Concurrent misses of one key share one store query, so a flood of one unknown key (or a cold
 *   cache under load) costs one query, and then one per negative-cache window.
 * - A change notification that arrives while a query runs `forget`s it: the requests already
 *   waiting get its answer (they started before the change), but the answer is not cached (it may
 *   predate the change) and later requests start a new query instead of joining the old one.
 *   Without this, a key revoked during a slow lookup was put back in the cache for `cacheTtlMs`.
 */
export class SingleFlight<K, V> {
  readonly #running = new Map<K, Promise<V>>()

  /**
   * The running load of `key`, else a new one from `load`. When the new load settles and was not
   * forgotten meanwhile, `keep` receives its value: that is where the caller caches it.
   */
  run(key: K, load: () => Promise<V>, keep: (value: V) => void): Promise<V> {
    const running = this.#running.get(key)
    if (running !== undefined) return running
    const flight: Promise<V> = load().then(
      (value) => {
        if (this.#running.get(key) === flight) {
          this.#running.delete(key)
          keep(value)
        }
        return value
      },
      (error: unknown) => {
        if (this.#running.get(key) === flight) this.#running.delete(key)
        throw error
      },
    )
    this.#running.set(key, flight)
    return flight
  }

  /** Detaches the running load of `key`: its value is still returned to its callers, never kept. */
  forget(key: K): void {
    this.#running.delete(key)
  }

  /** Detaches every running load. */
  forgetAll(): void {
    this.#running.clear()
  }
}
