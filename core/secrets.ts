/**
 * The API key secret format, shared by whoever issues keys (Admin API, bootstrap) and whoever checks
 * them (auth): secrets are random, stored only as a hex SHA-256 hash, and shown masked on reads.
 */
import { hash, randomBytes, randomUUID } from 'node:crypto'
import type { ApiKeyRecord } from './admin-records.js'

/** A new API key secret: `gw-` and 32 random bytes in base64url. */
export function newApiKeySecret(): string {
  return `gw-${randomBytes(32).toString('base64url')}`
}

/** The stored form of a secret: hex SHA-256 (auth hashes every request's key: the one-shot `hash` is about 3× faster than `createHash`). */
export function hashSecret(secret: string): string {
  return hash('sha256', secret, 'hex')
}

/** Display form: the first 2 characters, `********`, the last 3 (a leading `Bearer ` is dropped). */
export function maskSecret(secret: string): string {
  const bare = secret.startsWith('Bearer ') ? secret.slice(7) : secret
  if (bare.length <= 8) return '********'
  return `${bare.slice(0, 2)}********${bare.slice(-3)}`
}

/** What differs between newly issued API keys; everything else starts empty. */
export type NewApiKeyFields = Pick<
  ApiKeyRecord,
  'name' | 'description' | 'type' | 'organisationId' | 'workspaceId' | 'userId' | 'scopes' | 'expiresAt' | 'creationMode' | 'createdAt'
> &
  Partial<Pick<ApiKeyRecord, 'id' | 'rateLimits' | 'usageLimits' | 'defaults' | 'alertEmails'>>

/**
 * Issues a key: a new secret (or `secret` when given, e.g. the bootstrap key from the environment)
 * and the record to store, which holds only its hash and masked form. The secret is shown once.
 */
export function issueApiKey(fields: NewApiKeyFields, secret: string = newApiKeySecret()): { secret: string; record: ApiKeyRecord } {
  return {
    secret,
    record: {
      id: fields.id ?? randomUUID(),
      keyHash: hashSecret(secret),
      maskedKey: maskSecret(secret),
      name: fields.name,
      description: fields.description,
      type: fields.type,
      organisationId: fields.organisationId,
      workspaceId: fields.workspaceId,
      userId: fields.userId,
      scopes: fields.scopes,
      status: 'active',
      expiresAt: fields.expiresAt,
      creationMode: fields.creationMode,
      rateLimits: fields.rateLimits ?? [],
      usageLimits: fields.usageLimits ?? null,
      defaults: fields.defaults ?? null,
      alertEmails: fields.alertEmails ?? [],
      previousKeyHash: null,
      previousKeyExpiresAt: null,
      lastRotatedAt: null,
      createdAt: fields.createdAt,
      lastUpdatedAt: fields.createdAt,
    },
  }
}
