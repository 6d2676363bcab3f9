/**
 * The gateway's own limits on request header fields (API.md §2): more than `MAX_HEADER_FIELDS`
 * fields, or more than `MAX_HEADER_BYTES` of them, is answered 431 and the connection closed.
 *
 * uWebSockets.js 20.30 refuses some header blocks before the gateway sees them, without a reply
 * (measured with raw sockets; `test/security/bad-input.test.ts` pins it down):
 * - 49 or more header fields, or a NUL, CR, LF or other control byte in a value (a tab is
 *   fine): no reply, and the connection is held until uWS's 10 s idle timeout closes it (12 s);
 * - no `Host` header: the connection is closed at once;
 * - a request (line and header block) that does not arrive in one read and passes 4096 bytes
 *   while incomplete: the connection is closed at once; one over the 512 KB read buffer is reset.
 * So the 100-field limit below is the contract's, enforced here in case a build allows more
 * fields; with this build the count check can never fire. A block of up to 512 KB that arrives in
 * one read does reach the gateway, so the byte limit is what answers those.
 */

/** Most header fields accepted (each line counts, repeated names too). */
export const MAX_HEADER_FIELDS = 100
/**
 * Most bytes of header fields accepted, counted as name + value + 4 (`: ` and CRLF) per field, by
 * the length of the strings uWS hands over (the byte count for ASCII text).
 */
export const MAX_HEADER_BYTES = 16 * 1024

/** The message of the 431, or `null` when the fields are within the limits. */
export function headerLimitProblem(fields: number, bytes: number): string | null {
  if (fields > MAX_HEADER_FIELDS) return `The request has ${fields} header fields; at most ${MAX_HEADER_FIELDS} are accepted`
  if (bytes > MAX_HEADER_BYTES) return `The request header fields take ${bytes} bytes; at most ${MAX_HEADER_BYTES} are accepted`
  return null
}
