/**
 * What a refused JWT claims about its sender, read without verifying it, for one purpose only: to
 * file the audit entry of the refused request under the organisation it names, as the user it
 * names. Nothing else may trust these claims; the token itself is never kept.
 *
 * The claim names follow API.md §1 (as auth reads them): the organisation is `gateway_oid`, else
 * `organisation_id`; the user is `email_id`, else `sub`, else `uid`.
 */

/** The unverified organisation and subject of a JWT-shaped credential. */
export interface ClaimedIdentity {
  /** A UUID (lower case), or `null` when the token names none or something that cannot be one. */
  readonly organisationId: string | null
  /** At most `MAX_SUBJECT_CHARS` characters, or `null`. */
  readonly subject: string | null
}

/** As long as the audit log's `user_id` filter takes. */
export const MAX_SUBJECT_CHARS = 320

/** Payloads longer than this are not read (the request head is limited to 16 KiB anyway). */
const MAX_PAYLOAD_CHARS = 16 * 1024

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
const BASE64URL = /^[A-Za-z0-9_-]+$/

function stringClaim(payload: Record<string, unknown>, ...names: readonly string[]): string | null {
  for (const name of names) {
    const value = payload[name]
    if (typeof value === 'string' && value.length > 0) return value
  }
  return null
}

/**
 * The claims of `credential` when it has the JWS compact form (three base64url parts, a JSON object
 * payload); `null` for anything else (an API key has no dots, so it leaves at the first check).
 */
export function claimedIdentity(credential: string | null): ClaimedIdentity | null {
  if (credential === null) return null
  const first = credential.indexOf('.')
  if (first <= 0) return null
  const second = credential.indexOf('.', first + 1)
  if (second < 0 || credential.indexOf('.', second + 1) >= 0) return null
  const encoded = credential.slice(first + 1, second)
  if (encoded.length > MAX_PAYLOAD_CHARS || !BASE64URL.test(encoded)) return null
  let payload: unknown
  try {
    payload = JSON.parse(Buffer.from(encoded, 'base64url').toString('utf8'))
  } catch {
    return null
  }
  if (payload === null || typeof payload !== 'object' || Array.isArray(payload)) return null
  const claims = payload as Record<string, unknown>
  // As auth reads it: `organisation_id` only when `gateway_oid` is absent.
  const organisation = claims.gateway_oid ?? claims.organisation_id
  const subject = stringClaim(claims, 'email_id', 'sub', 'uid')
  return {
    organisationId: typeof organisation === 'string' && UUID.test(organisation) ? organisation.toLowerCase() : null,
    subject: subject === null ? null : subject.slice(0, MAX_SUBJECT_CHARS),
  }
}
