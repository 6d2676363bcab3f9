/**
 * Where the master key of `AesGcmSecretCipher` comes from (DESIGN §6):
 * 1. `GATEWAY_MASTER_KEY`: 64 hex characters, or the standard or URL-safe base64 of 32 bytes;
 * 2. otherwise, with the embedded admin store only, the key file `<GATEWAY_DATA_DIR>/master.key`
 *    (64 hex characters), created with mode 0600 on first start. A file that other users may
 *    read or write, or that does not hold a 32-byte key, stops the boot: guessing would either
 *    leak the key or seal new secrets under a key that cannot open the old ones;
 * 3. with MongoDB and no `GATEWAY_MASTER_KEY`, boot is refused: every instance must share one key,
 *    and a per-machine file cannot give them that.
 * Errors are `MasterKeyError`s naming the variable or file; they never contain key material.
 */
import { randomBytes } from 'node:crypto'
import {
  closeSync,
  fchmodSync,
  fstatSync,
  fsyncSync,
  linkSync,
  mkdirSync,
  openSync,
  readFileSync,
  rmSync,
  writeSync,
} from 'node:fs'
import { dirname, join } from 'node:path'

export const MASTER_KEY_VARIABLE = 'GATEWAY_MASTER_KEY'
export const MASTER_KEY_FILE = 'master.key'
const KEY_BYTES = 32

export class MasterKeyError extends Error {
  /** The environment variable or file the problem is about. */
  readonly source: string
  /** The message without the source. */
  readonly detail: string
  constructor(source: string, detail: string) {
    super(`${source}: ${detail}`)
    this.name = 'MasterKeyError'
    this.source = source
    this.detail = detail
  }
}

/** 64 hex characters, or base64 / base64url of exactly 32 bytes; `null` for anything else. */
export function parseMasterKey(text: string): Buffer | null {
  const value = text.trim()
  if (/^[0-9a-fA-F]{64}$/.test(value)) return Buffer.from(value, 'hex')
  if (/^[A-Za-z0-9+/_-]{43}=?$/.test(value)) {
    const bytes = Buffer.from(value.replace(/-/g, '+').replace(/_/g, '/'), 'base64')
    if (bytes.length === KEY_BYTES) return bytes
  }
  return null
}

export interface MasterKeyOptions {
  /** `GATEWAY_MASTER_KEY`, or `null` when unset. */
  readonly envValue: string | null
  /** `GATEWAY_DATA_DIR`: where the key file lives. */
  readonly dataDir: string
  /** True when the admin store is the embedded DuckDB file (no `MONGODB_URI`). */
  readonly embeddedStore: boolean
}

export interface ResolvedMasterKey {
  readonly key: Buffer
  /** `GATEWAY_MASTER_KEY`, or the key file's path. */
  readonly source: string
  /** True when this call created the key file. */
  readonly created: boolean
}

export function resolveMasterKey(options: MasterKeyOptions): ResolvedMasterKey {
  if (options.envValue !== null) {
    const key = parseMasterKey(options.envValue)
    if (key === null) {
      throw new MasterKeyError(
        MASTER_KEY_VARIABLE,
        'must be 64 hex characters or the base64 of 32 random bytes (e.g. the output of `openssl rand -hex 32`); value not shown',
      )
    }
    return { key, source: MASTER_KEY_VARIABLE, created: false }
  }
  if (!options.embeddedStore) {
    throw new MasterKeyError(
      MASTER_KEY_VARIABLE,
      'is required with MONGODB_URI: every gateway instance must seal and open provider credentials with the same key. ' +
        'Set it to 64 hex characters (e.g. `openssl rand -hex 32`) on every instance',
    )
  }
  return keyFile(join(options.dataDir, MASTER_KEY_FILE))
}

/**
 * Reads the key file, or creates it with mode 0600. The key is written to a private temporary
 * file first and then hard-linked into place, which fails if the file already exists: a crash
 * never leaves a half-written key file, and two processes starting at once agree on one key.
 */
function keyFile(path: string): ResolvedMasterKey {
  const directory = dirname(path)
  const temporary = join(directory, `.${MASTER_KEY_FILE}.${process.pid}.${randomBytes(4).toString('hex')}`)
  const key = randomBytes(KEY_BYTES)
  try {
    mkdirSync(directory, { recursive: true, mode: 0o700 })
    const fd = openSync(temporary, 'wx', 0o600)
    try {
      // The umask can only narrow the mode; fchmod states it exactly.
      fchmodSync(fd, 0o600)
      writeSync(fd, `${key.toString('hex')}\n`)
      fsyncSync(fd)
    } finally {
      closeSync(fd)
    }
    linkSync(temporary, path)
    return { key, source: path, created: true }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return existingKeyFile(path)
    throw new MasterKeyError(path, `cannot create the master key file: ${(error as Error).message}`)
  } finally {
    rmSync(temporary, { force: true })
  }
}

function existingKeyFile(path: string): ResolvedMasterKey {
  let fd: number
  try {
    fd = openSync(path, 'r')
  } catch (error) {
    throw new MasterKeyError(path, `cannot read the master key file: ${(error as Error).message}`)
  }
  try {
    const mode = fstatSync(fd).mode & 0o777
    if ((mode & 0o077) !== 0) {
      throw new MasterKeyError(
        path,
        `the master key file has permissions ${mode.toString(8).padStart(4, '0')}; other users may read it. ` +
          `Restrict it with \`chmod 600 ${path}\` and start again`,
      )
    }
    const key = parseMasterKey(readFileSync(fd, 'utf8'))
    if (key === null) {
      throw new MasterKeyError(
        path,
        'does not hold a 32-byte master key (64 hex characters). Restore the original file: without it the stored provider credentials cannot be opened',
      )
    }
    return { key, source: path, created: false }
  } finally {
    closeSync(fd)
  }
}
