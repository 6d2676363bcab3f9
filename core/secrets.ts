/**
 * The API key secret format, shared by whoever issues keys (Admin API, bootstrap) and whoever checks
 * them (auth): secrets are random, stored only as a hex SHA-256 hash, and shown masked on reads.
 */
import { createHash, randomBytes } from 'node:crypto'

/** A new API key secret: `gw-` and 32 random bytes in base64url. */
export function newApiKeySecret(): string {
  return `gw-${randomBytes(32).toString('base64url')}`
}

/** The stored form of a secret: hex SHA-256. */
export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret).digest('hex')
}

/** Display form: the first 2 characters, `********`, the last 3 (a leading `Bearer ` is dropped). */
export function maskSecret(secret: string): string {
  const bare = secret.startsWith('Bearer ') ? secret.slice(7) : secret
  if (bare.length <= 8) return '********'
  return `${bare.slice(0, 2)}********${bare.slice(-3)}`
}
