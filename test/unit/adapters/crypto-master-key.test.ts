/** Where the master key comes from (adapters/crypto/master-key.ts). */
import { randomBytes } from 'node:crypto'
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { MasterKeyError, parseMasterKey, resolveMasterKey } from '../../../adapters/crypto/master-key.js'

let dir: string

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'gw-master-key-'))
})

afterEach(() => {
  rmSync(dir, { recursive: true, force: true })
})

function failure(run: () => unknown): MasterKeyError {
  try {
    run()
  } catch (error) {
    expect(error).toBeInstanceOf(MasterKeyError)
    return error as MasterKeyError
  }
  throw new Error('expected a MasterKeyError')
}

describe('parseMasterKey', () => {
  const key = randomBytes(32)

  it('accepts 64 hex characters (either case) and base64 or base64url of 32 bytes', () => {
    for (const text of [key.toString('hex'), key.toString('hex').toUpperCase(), key.toString('base64'), key.toString('base64url'), ` ${key.toString('hex')}\n`]) {
      expect(parseMasterKey(text)).toEqual(key)
    }
  })

  it('refuses anything else', () => {
    for (const text of ['', 'secret', key.toString('hex').slice(2), `${key.toString('hex')}00`, randomBytes(16).toString('base64'), randomBytes(33).toString('base64'), 'z'.repeat(64)]) {
      expect(parseMasterKey(text), text).toBeNull()
    }
  })
})

describe('resolveMasterKey', () => {
  it('uses GATEWAY_MASTER_KEY when set, with either store, and writes no file', () => {
    const key = randomBytes(32)
    for (const embeddedStore of [true, false]) {
      const resolved = resolveMasterKey({ envValue: key.toString('base64'), dataDir: dir, embeddedStore })
      expect(resolved.key).toEqual(key)
      expect(resolved.source).toBe('GATEWAY_MASTER_KEY')
    }
    expect(() => statSync(join(dir, 'master.key'))).toThrow()
  })

  it('refuses a malformed GATEWAY_MASTER_KEY, naming the variable and not echoing the value', () => {
    const error = failure(() => resolveMasterKey({ envValue: 'not-a-key-hunter2', dataDir: dir, embeddedStore: true }))
    expect(error.message).toMatch(/^GATEWAY_MASTER_KEY: must be 64 hex characters or the base64 of 32/)
    expect(error.message).not.toContain('hunter2')
  })

  it('refuses MongoDB without GATEWAY_MASTER_KEY', () => {
    const error = failure(() => resolveMasterKey({ envValue: null, dataDir: dir, embeddedStore: false }))
    expect(error.message).toMatch(/GATEWAY_MASTER_KEY: is required with MONGODB_URI/)
  })

  it('creates <dataDir>/master.key with mode 0600 on first start, then reads it back', () => {
    const dataDir = join(dir, 'nested', 'data')
    const first = resolveMasterKey({ envValue: null, dataDir, embeddedStore: true })
    const path = join(dataDir, 'master.key')
    expect(first.created).toBe(true)
    expect(first.source).toBe(path)
    expect(first.key).toHaveLength(32)
    expect(statSync(path).mode & 0o777).toBe(0o600)
    expect(readFileSync(path, 'utf8').trim()).toBe(first.key.toString('hex'))
    const second = resolveMasterKey({ envValue: null, dataDir, embeddedStore: true })
    expect(second.created).toBe(false)
    expect(second.key).toEqual(first.key)
  })

  it('refuses a key file that other users may read or write', () => {
    resolveMasterKey({ envValue: null, dataDir: dir, embeddedStore: true })
    const path = join(dir, 'master.key')
    for (const mode of [0o644, 0o640, 0o602]) {
      chmodSync(path, mode)
      const error = failure(() => resolveMasterKey({ envValue: null, dataDir: dir, embeddedStore: true }))
      expect(error.message).toContain(path)
      expect(error.message).toContain(`permissions 0${mode.toString(8)}`)
      expect(error.message).toContain('chmod 600')
    }
    chmodSync(path, 0o400)
    expect(resolveMasterKey({ envValue: null, dataDir: dir, embeddedStore: true }).key).toHaveLength(32)
  })

  it('refuses a key file of the wrong length', () => {
    const path = join(dir, 'master.key')
    for (const content of [randomBytes(16).toString('hex'), '', randomBytes(32).toString('hex') + 'ab']) {
      writeFileSync(path, content, { mode: 0o600 })
      chmodSync(path, 0o600)
      const error = failure(() => resolveMasterKey({ envValue: null, dataDir: dir, embeddedStore: true }))
      expect(error.message).toContain(path)
      expect(error.message).toMatch(/does not hold a 32-byte master key/)
    }
  })

  it('reads the same key back on every later start', () => {
    const keys = Array.from({ length: 5 }, () => resolveMasterKey({ envValue: null, dataDir: dir, embeddedStore: true }).key.toString('hex'))
    expect(new Set(keys).size).toBe(1)
  })
})
