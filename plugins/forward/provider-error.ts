/**
 * Normalises a provider's error body on first-class routes into the OpenAI error shape, keeping the
 * provider's status and message (API.md §2). Bodies already in that shape pass unchanged.
 */
import type { ErrorType } from '../../core/errors.js'

function typeFor(status: number): ErrorType {
  if (status === 401) return 'authentication_error'
  if (status === 403) return 'permission_error'
  if (status === 404) return 'not_found_error'
  if (status === 408 || status === 504) return 'timeout_error'
  if (status === 429) return 'rate_limit_error'
  if (status < 500) return 'invalid_request_error'
  return 'upstream_error'
}

/** Returns the body to send: the original when already OpenAI-shaped, else a normalised one. */
export function normaliseProviderError(provider: string, status: number, body: Buffer): Buffer | string {
  const text = body.toString('utf8')
  let parsed: unknown = null
  try {
    parsed = JSON.parse(text)
  } catch {
    // Not JSON: the text itself becomes the message.
  }
  if (parsed !== null && typeof parsed === 'object') {
    const error = (parsed as Record<string, unknown>).error
    if (error !== null && typeof error === 'object' && typeof (error as Record<string, unknown>).message === 'string') return body
    const message =
      typeof error === 'string' ? error : typeof (parsed as Record<string, unknown>).message === 'string' ? ((parsed as Record<string, unknown>).message as string) : text
    return shape(provider, status, message)
  }
  return shape(provider, status, text.trim().length > 0 ? text.trim().slice(0, 2000) : `HTTP ${status}`)
}

function shape(provider: string, status: number, message: string): string {
  return JSON.stringify({ error: { message: `${provider} error: ${message}`, type: typeFor(status), param: null, code: null } })
}
