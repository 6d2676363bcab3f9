import { scryptSync } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { hashPassword, verifyPassword } from '../../../plugins/admin-api/password.js'

describe('admin-api password hashes', () => {
  it('encodes scrypt parameters, a 16-byte salt and a 32-byte key', async () => {
    const encoded = await hashPassword('correct horse battery staple')
    const parts = encoded.split('$')
    expect(parts.slice(0, 4)).toEqual(['scrypt', '16384', '8', '1'])
    expect(Buffer.from(parts[4] ?? '', 'base64url')).toHaveLength(16)
    expect(Buffer.from(parts[5] ?? '', 'base64url')).toHaveLength(32)
    expect(parts[4]).toMatch(/^[A-Za-z0-9_-]+$/)
    expect(parts[5]).toMatch(/^[A-Za-z0-9_-]+$/)
  })

  it('derives the key with the documented parameters (another implementation can check it)', async () => {
    const encoded = await hashPassword('s3cret-passw0rd')
    const [, , , , salt, hash] = encoded.split('$')
    const key = scryptSync('s3cret-passw0rd', Buffer.from(salt ?? '', 'base64url'), 32, { N: 16_384, r: 8, p: 1 })
    expect(key.toString('base64url')).toBe(hash)
  })

  it('verifies the password it hashed', async () => {
    const encoded = await hashPassword('correct horse battery staple')
    await expect(verifyPassword('correct horse battery staple', encoded)).resolves.toBe(true)
  })

  it('salts every hash: the same password hashes differently and both verify', async () => {
    const first = await hashPassword('same password')
    const second = await hashPassword('same password')
    expect(first).not.toBe(second)
    await expect(verifyPassword('same password', first)).resolves.toBe(true)
    await expect(verifyPassword('same password', second)).resolves.toBe(true)
  })

  it('refuses a wrong password', async () => {
    const encoded = await hashPassword('correct horse battery staple')
    await expect(verifyPassword('correct horse battery stapler', encoded)).resolves.toBe(false)
    await expect(verifyPassword('', encoded)).resolves.toBe(false)
  })

  it('treats non-ASCII passwords consistently', async () => {
    const encoded = await hashPassword('pässwörd-密码')
    await expect(verifyPassword('pässwörd-密码', encoded)).resolves.toBe(true)
    await expect(verifyPassword('passwörd-密码', encoded)).resolves.toBe(false)
  })

  it('answers false, without throwing, for tampered or malformed encodings', async () => {
    const encoded = await hashPassword('correct horse battery staple')
    const parts = encoded.split('$')
    const hash = Buffer.from(parts[5] ?? '', 'base64url')
    hash[0] = (hash[0] ?? 0) ^ 0xff
    const flippedHash = [...parts.slice(0, 5), hash.toString('base64url')].join('$')
    const otherSalt = [...parts.slice(0, 4), Buffer.alloc(16, 7).toString('base64url'), parts[5]].join('$')
    const shortHash = [...parts.slice(0, 5), (parts[5] ?? '').slice(0, 10)].join('$')
    const tampered = [
      flippedHash,
      otherSalt,
      shortHash,
      encoded.replace('scrypt$', 'bcrypt$'),
      encoded.replace('$16384$', '$16383$'),
      encoded.replace('$16384$', '$0$'),
      encoded.replace('$16384$', '$-16384$'),
      encoded.replace('$16384$', '$1073741824$'),
      encoded.replace('$8$1$', '$800$1$'),
      encoded.replace('$8$1$', '$8$x$'),
      `${encoded}$extra`,
      parts.slice(0, 5).join('$'),
      [...parts.slice(0, 4), '', parts[5]].join('$'),
      [...parts.slice(0, 5), ''].join('$'),
      [...parts.slice(0, 5), 'not base64!'].join('$'),
      '',
      'scrypt',
      'plain-text-password',
    ]
    for (const candidate of tampered) {
      await expect(verifyPassword('correct horse battery staple', candidate), candidate).resolves.toBe(false)
    }
  })

  it('refuses encodings whose parameters would exhaust memory, quickly', async () => {
    const encoded = await hashPassword('pw')
    const parts = encoded.split('$')
    const huge = ['scrypt', String(1 << 20), '32', '16', parts[4], parts[5]].join('$')
    const started = Date.now()
    await expect(verifyPassword('pw', huge)).resolves.toBe(false)
    expect(Date.now() - started).toBeLessThan(5_000)
  })
})
