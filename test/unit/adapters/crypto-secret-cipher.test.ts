/** AES-256-GCM sealing of provider credentials (adapters/crypto/aes-gcm-secret-cipher.ts). */
import { randomBytes } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { AesGcmSecretCipher, masterKeyId } from '../../../adapters/crypto/aes-gcm-secret-cipher.js'

const key = randomBytes(32)
const cipher = new AesGcmSecretCipher(key)

/** Flips one bit of the base64url part `index` of a sealed text. */
function flipBit(sealed: string, index: number): string {
  const parts = sealed.split('.')
  const bytes = Buffer.from(parts[index] as string, 'base64url')
  bytes[0] = (bytes[0] as number) ^ 1
  parts[index] = bytes.toString('base64url')
  return parts.join('.')
}

describe('AesGcmSecretCipher', () => {
  it('round-trips secrets, empty and non-ASCII ones included', () => {
    for (const secret of ['sk-live-0123456789abcdef', '', 'clé-秘密-🔑', 'x'.repeat(10_000)]) {
      expect(cipher.open(cipher.seal(secret))).toBe(secret)
    }
  })

  it('seals as v1.<keyId>.<iv>.<tag>.<ciphertext> without the plaintext', () => {
    const sealed = cipher.seal('sk-live-0123456789abcdef')
    const [version, keyId, iv, tag, ciphertext] = sealed.split('.')
    expect(version).toBe('v1')
    expect(keyId).toBe(masterKeyId(key))
    expect(keyId).toMatch(/^[0-9a-f]{8}$/)
    expect(Buffer.from(iv as string, 'base64url')).toHaveLength(12)
    expect(Buffer.from(tag as string, 'base64url')).toHaveLength(16)
    expect(Buffer.from(ciphertext as string, 'base64url')).toHaveLength('sk-live-0123456789abcdef'.length)
    expect(sealed).not.toContain('sk-live')
  })

  it('uses a fresh random IV for every seal', () => {
    const sealed = Array.from({ length: 200 }, () => cipher.seal('same secret'))
    expect(new Set(sealed.map((text) => text.split('.')[2])).size).toBe(200)
    expect(new Set(sealed).size).toBe(200)
  })

  it('refuses tampered ciphertext, tag or IV', () => {
    const sealed = cipher.seal('sk-live-0123456789abcdef')
    for (const index of [2, 3, 4]) {
      expect(() => cipher.open(flipBit(sealed, index))).toThrow(/tampered|damaged/)
    }
  })

  it('refuses text sealed under another master key with a clear message', () => {
    const other = new AesGcmSecretCipher(randomBytes(32))
    expect(() => cipher.open(other.seal('sk-live-0123456789abcdef'))).toThrow(/sealed with another master key/)
  })

  it('refuses text with a forged key id (another key) even if the id matches', () => {
    const other = new AesGcmSecretCipher(randomBytes(32))
    const parts = other.seal('secret').split('.')
    parts[1] = cipher.keyId
    expect(() => cipher.open(parts.join('.'))).toThrow(/tampered|damaged/)
  })

  it('refuses text that is not a sealed secret', () => {
    for (const text of ['', 'sk-plain', 'v2.a.b.c.d', 'v1.a.b.c']) expect(() => cipher.open(text)).toThrow(/not a sealed secret/)
  })

  it('needs a 32-byte key', () => {
    expect(() => new AesGcmSecretCipher(randomBytes(16))).toThrow(/32 bytes/)
  })
})
