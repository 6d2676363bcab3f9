/**
 * Password hashes of console users (set when a user accepts an invite): scrypt with a random salt,
 * stored as `scrypt$N$r$p$<salt>$<hash>` (base64url parts) so the cost can be raised later without
 * invalidating stored hashes.
 */
import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto'

const COST = 16_384
const BLOCK_SIZE = 8
const PARALLELISM = 1
const SALT_BYTES = 16
const KEY_BYTES = 32

// A stored hash decides the work done to check it: bounds keep a corrupted row from costing
// gigabytes of memory or minutes of CPU.
const MAX_COST = 1 << 20
const MAX_BLOCK_SIZE = 32
const MAX_PARALLELISM = 16
const MAX_KEY_BYTES = 128
const MAX_MEMORY_BYTES = 256 * 1024 * 1024

const BASE64URL = /^[A-Za-z0-9_-]+$/

function derive(password: string, salt: Buffer, keyBytes: number, options: ScryptOptions): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    scrypt(password.normalize('NFC'), salt, keyBytes, options, (error, key) => (error ? reject(error) : resolve(key)))
  })
}

/** A new salted scrypt hash of `password`. */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(SALT_BYTES)
  const key = await derive(password, salt, KEY_BYTES, { N: COST, r: BLOCK_SIZE, p: PARALLELISM })
  return `scrypt$${COST}$${BLOCK_SIZE}$${PARALLELISM}$${salt.toString('base64url')}$${key.toString('base64url')}`
}

function parameter(text: string | undefined, max: number): number | null {
  if (text === undefined || !/^[1-9][0-9]{0,9}$/.test(text)) return null
  const value = Number(text)
  return value <= max ? value : null
}

/** Whether `password` matches `encoded`; a malformed or unsupported encoding is a mismatch, never an error. */
export async function verifyPassword(password: string, encoded: string): Promise<boolean> {
  const parts = encoded.split('$')
  if (parts.length !== 6 || parts[0] !== 'scrypt') return false
  const cost = parameter(parts[1], MAX_COST)
  const blockSize = parameter(parts[2], MAX_BLOCK_SIZE)
  const parallelism = parameter(parts[3], MAX_PARALLELISM)
  const [saltText, hashText] = [parts[4] ?? '', parts[5] ?? '']
  if (cost === null || blockSize === null || parallelism === null) return false
  if ((cost & (cost - 1)) !== 0 || cost < 2) return false
  if (!BASE64URL.test(saltText) || !BASE64URL.test(hashText)) return false
  const salt = Buffer.from(saltText, 'base64url')
  const expected = Buffer.from(hashText, 'base64url')
  // scrypt output is a stream: a truncated hash is a prefix of the right one, so short keys are refused.
  if (salt.length === 0 || expected.length < KEY_BYTES || expected.length > MAX_KEY_BYTES) return false
  try {
    const actual = await derive(password, salt, expected.length, { N: cost, r: blockSize, p: parallelism, maxmem: MAX_MEMORY_BYTES })
    return timingSafeEqual(actual, expected)
  } catch {
    return false
  }
}
