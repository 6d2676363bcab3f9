/**
 * `SecretCipher` with AES-256-GCM under the master key (DESIGN §6).
 *
 * Sealed form: `v1.<keyId>.<iv>.<tag>.<ciphertext>` — keyId is the first 8 hex characters of the
 * SHA-256 of the master key; iv (12 random bytes per seal), tag (16 bytes) and ciphertext are
 * base64url. The keyId lets `open` tell "sealed under another master key" apart from tampering,
 * instead of answering both with one opaque authentication failure. It reveals nothing usable: 32
 * bits of a hash of a 256-bit random key.
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto'
import type { SecretCipher } from '../../core/ports.js'

const VERSION = 'v1'
const ALGORITHM = 'aes-256-gcm'
const KEY_BYTES = 32
const IV_BYTES = 12
const TAG_BYTES = 16

/** The first 8 hex characters of the SHA-256 of `key`: names the key in sealed text. */
export function masterKeyId(key: Uint8Array): string {
  return createHash('sha256').update(key).digest('hex').slice(0, 8)
}

/** Thrown by `open`; the message never contains the sealed text or the plaintext. */
export class SealedSecretError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'SealedSecretError'
  }
}

export class AesGcmSecretCipher implements SecretCipher {
  readonly #key: Buffer
  /** Names the master key in sealed text (see `masterKeyId`). */
  readonly keyId: string

  /** `key`: the 32-byte master key (copied). */
  constructor(key: Uint8Array) {
    if (key.length !== KEY_BYTES) throw new Error(`the master key must be ${KEY_BYTES} bytes, got ${key.length}`)
    this.#key = Buffer.from(key)
    this.keyId = masterKeyId(this.#key)
  }

  seal(plaintext: string): string {
    const iv = randomBytes(IV_BYTES)
    const cipher = createCipheriv(ALGORITHM, this.#key, iv, { authTagLength: TAG_BYTES })
    const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()])
    const tag = cipher.getAuthTag()
    return `${VERSION}.${this.keyId}.${iv.toString('base64url')}.${tag.toString('base64url')}.${ciphertext.toString('base64url')}`
  }

  open(sealed: string): string {
    const parts = sealed.split('.')
    if (parts.length !== 5 || parts[0] !== VERSION) throw new SealedSecretError('not a sealed secret (expected v1.<keyId>.<iv>.<tag>.<ciphertext>)')
    const [, keyId, ivText, tagText, ciphertextText] = parts as [string, string, string, string, string]
    if (keyId !== this.keyId) {
      throw new SealedSecretError(`the secret was sealed with another master key (key id ${keyId}; the current master key has id ${this.keyId})`)
    }
    const iv = Buffer.from(ivText, 'base64url')
    const tag = Buffer.from(tagText, 'base64url')
    if (iv.length !== IV_BYTES || tag.length !== TAG_BYTES) throw new SealedSecretError('the sealed secret is damaged (bad IV or tag length)')
    const decipher = createDecipheriv(ALGORITHM, this.#key, iv, { authTagLength: TAG_BYTES })
    decipher.setAuthTag(tag)
    try {
      return Buffer.concat([decipher.update(Buffer.from(ciphertextText, 'base64url')), decipher.final()]).toString('utf8')
    } catch {
      throw new SealedSecretError('the sealed secret failed authentication: it was tampered with or damaged')
    }
  }
}
