/**
 * The bottom of core: what every port and adapter is built from. Typed injection tokens, the
 * `Service` lifecycle every adapter implements, and the two services everything uses, the process
 * `Logger` and the `Clock`. Imports nothing.
 *
 * Every adapter is a `Service`: `start()` is awaited at boot before the first request, `close()` at
 * shutdown after in-flight requests drained, `health()` backs `/readyz`.
 */

/** A typed injection token. The phantom field carries the type; it never exists at runtime. */
export type Token<T> = symbol & { readonly __port?: T }

/** The token of a port or service named `name` (one symbol per name across module copies). */
export function portToken<T>(name: string): Token<T> {
  return Symbol.for(`gateway:${name}`) as Token<T>
}

export interface HealthStatus {
  readonly ok: boolean
  /** Short, secret-free explanation when not ok. */
  readonly detail?: string
}

/** Lifecycle every adapter implements. */
export interface Service {
  start(): Promise<void>
  close(): Promise<void>
  health(): Promise<HealthStatus>
}

/** Structured process logger (pino-compatible subset). Never pass secrets. */
export interface Logger {
  debug(fields: object, message?: string): void
  info(fields: object, message?: string): void
  warn(fields: object, message?: string): void
  error(fields: object, message?: string): void
}
export const Logger = portToken<Logger>('Logger')

/** Time source, injectable so limits and expiry are testable. */
export interface Clock {
  now(): number
}
export const Clock = portToken<Clock>('Clock')
