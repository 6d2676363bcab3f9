/**
 * Loads the configuration: `config/default.json`, then the overlay file named by `GATEWAY_CONFIG`,
 * then an in-code overlay (tests), then the environment. Objects merge key by key; arrays and
 * scalars replace. Every mistake is a `ConfigError` naming the key.
 *
 * Variables that go into the config: `PORT` (server.port); `GATEWAY_BOOTSTRAP_ADMIN_KEY`,
 * `GATEWAY_JWKS_URL` / `GATEWAY_JWKS` (one of them), `GATEWAY_JWT_ISSUER`, `GATEWAY_JWT_AUDIENCE`
 * (a comma list; both need a JWKS) and `GATEWAY_PUBLIC_URL` (the auth plugin's `bootstrap`);
 * `GATEWAY_PUBLIC_URL` again (admin-api's `publicUrl`, the base of invite links).
 * Variables read into `environment`: `MONGODB_URI`, `REDIS_URL` (`?cluster=true` selects Redis
 * Cluster for the rate limiter and the budget ledger), `CLICKHOUSE_URL` (path = database), `GATEWAY_PUBLIC_URL`, `GATEWAY_DATA_DIR`,
 * `GATEWAY_ALLOWED_CUSTOM_HOSTS`, `GATEWAY_LOG_LEVEL`, `GATEWAY_MASTER_KEY` (resolved by the
 * composition root when a plugin needs the secret cipher).
 */
import { readFileSync } from 'node:fs'
import { ConfigError } from '../core/registry.js'
import defaults from './default.json' with { type: 'json' }
import { gatewayConfigSchema, type GatewayConfig, type GatewayEnvironment } from './schema.js'

export type Environment = Readonly<Record<string, string | undefined>>

export interface LoadedConfig {
  readonly config: GatewayConfig
  readonly environment: GatewayEnvironment
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
}

/** Deep merge: objects key by key, everything else replaced by the overlay. */
export function mergeConfig(base: unknown, overlay: unknown): unknown {
  if (!isPlainObject(base) || !isPlainObject(overlay)) return overlay === undefined ? base : overlay
  const merged: Record<string, unknown> = { ...base }
  for (const [key, value] of Object.entries(overlay)) merged[key] = mergeConfig(base[key], value)
  return merged
}

function readOverlayFile(path: string): unknown {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (error) {
    throw new ConfigError('GATEWAY_CONFIG', `cannot read ${path}: ${(error as Error).message}`)
  }
  try {
    return JSON.parse(text)
  } catch (error) {
    throw new ConfigError('GATEWAY_CONFIG', `${path} is not valid JSON: ${(error as Error).message}`)
  }
}

function setPath(target: Record<string, unknown>, path: readonly string[], value: unknown): void {
  let node = target
  for (const key of path.slice(0, -1)) {
    if (!isPlainObject(node[key])) node[key] = {}
    node = node[key] as Record<string, unknown>
  }
  node[path[path.length - 1] as string] = value
}

/** The value at `path` in `target`, or `undefined`. */
function getPath(target: unknown, path: readonly string[]): unknown {
  let node = target
  for (const key of path) node = isPlainObject(node) ? node[key] : undefined
  return node
}

/** The variable's value, or null when unset or empty (an empty variable means "not set"). */
function optional(env: Environment, name: string): string | null {
  const value = env[name]
  return value === undefined || value === '' ? null : value
}

/**
 * A store connection string, checked for its scheme only (a MongoDB URI may list several
 * `host:port` pairs, which a WHATWG URL parser rejects). Messages never echo the value: it
 * usually carries a password.
 */
function storeUrl(env: Environment, name: string, schemes: readonly string[]): string | null {
  const value = optional(env, name)
  if (value === null) return null
  const scheme = schemes.find((candidate) => value.startsWith(candidate))
  if (scheme === undefined || value.length === scheme.length) {
    throw new ConfigError(name, `must be a URL starting with ${schemes.join(' or ')} (value not shown: it may hold a password)`)
  }
  return value
}

/** An absolute http(s) URL, or a ConfigError naming `name`. */
function httpUrl(name: string, value: string): URL {
  let url: URL
  try {
    url = new URL(value)
  } catch {
    throw new ConfigError(name, `must be an absolute http:// or https:// URL, got "${value}"`)
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new ConfigError(name, `must be an http:// or https:// URL, got "${value}"`)
  return url
}

/** `GATEWAY_PUBLIC_URL`: links are built by appending paths, so no query, fragment or credentials; trailing slashes are dropped. */
function publicUrl(value: string): string {
  const url = httpUrl('GATEWAY_PUBLIC_URL', value)
  if (url.search !== '' || url.hash !== '' || url.username !== '' || url.password !== '') {
    throw new ConfigError('GATEWAY_PUBLIC_URL', 'must be a base URL without query, fragment or credentials')
  }
  return url.toString().replace(/\/+$/, '')
}

const CLICKHOUSE_DATABASE = /^[A-Za-z_][A-Za-z0-9_]*$/

/**
 * `CLICKHOUSE_URL`: `http(s)://[user:password@]host:port[/database]`. Messages never echo the
 * value (it usually carries a password).
 */
function clickHouseSettings(value: string | null): { url: string; database: string } | null {
  if (value === null) return null
  let url: URL
  try {
    url = new URL(value)
  } catch {
    throw new ConfigError('CLICKHOUSE_URL', 'must be an http:// or https:// URL of the ClickHouse HTTP interface (value not shown: it may hold a password)')
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ConfigError('CLICKHOUSE_URL', 'must be an http:// or https:// URL of the ClickHouse HTTP interface (value not shown: it may hold a password)')
  }
  const path = url.pathname.replace(/^\/+|\/+$/g, '')
  if (path !== '' && !CLICKHOUSE_DATABASE.test(path)) {
    throw new ConfigError('CLICKHOUSE_URL', 'the path names the database and must match [A-Za-z_][A-Za-z0-9_]*')
  }
  url.pathname = '/'
  return { url: url.toString(), database: path === '' ? 'gateway' : path }
}

/** `GATEWAY_JWKS`: a static JSON Web Key Set, `{"keys":[{...}, ...]}` with at least one key. */
function staticJwks(value: string): { keys: Array<Record<string, unknown>> } {
  let parsed: unknown
  try {
    parsed = JSON.parse(value)
  } catch (error) {
    throw new ConfigError('GATEWAY_JWKS', `is not valid JSON: ${(error as Error).message}`)
  }
  if (!isPlainObject(parsed) || !Array.isArray(parsed.keys)) throw new ConfigError('GATEWAY_JWKS', 'must be a JSON Web Key Set: {"keys":[...]}')
  if (parsed.keys.length === 0) throw new ConfigError('GATEWAY_JWKS', 'holds no keys: every JWT would be refused')
  if (!parsed.keys.every(isPlainObject)) throw new ConfigError('GATEWAY_JWKS', 'every entry of "keys" must be a JSON object (a JWK)')
  return parsed as { keys: Array<Record<string, unknown>> }
}

/** `GATEWAY_JWT_AUDIENCE`: one audience or a comma list of them (a token must carry one). */
function jwtAudiences(value: string): string[] {
  const audiences = [...new Set(value.split(',').map((entry) => entry.trim()).filter((entry) => entry.length > 0))]
  if (audiences.length === 0) throw new ConfigError('GATEWAY_JWT_AUDIENCE', 'names no audience (a comma list of audiences)')
  return audiences
}

export function loadConfig(env: Environment, overlay?: unknown): LoadedConfig {
  const mongodbUri = storeUrl(env, 'MONGODB_URI', ['mongodb://', 'mongodb+srv://'])
  const redisUrl = storeUrl(env, 'REDIS_URL', ['redis://', 'rediss://'])
  const clickhouse = clickHouseSettings(optional(env, 'CLICKHOUSE_URL'))
  const jwksUrlValue = optional(env, 'GATEWAY_JWKS_URL')
  const jwksValue = optional(env, 'GATEWAY_JWKS')
  if (jwksUrlValue !== null && jwksValue !== null) {
    throw new ConfigError('GATEWAY_JWKS', 'GATEWAY_JWKS_URL and GATEWAY_JWKS are both set; use one')
  }
  const publicUrlValue = optional(env, 'GATEWAY_PUBLIC_URL')
  const configuredPublicUrl = publicUrlValue === null ? null : publicUrl(publicUrlValue)
  let raw = structuredClone(defaults) as unknown
  if (env.GATEWAY_CONFIG !== undefined && env.GATEWAY_CONFIG !== '') raw = mergeConfig(raw, readOverlayFile(env.GATEWAY_CONFIG))
  if (overlay !== undefined) raw = mergeConfig(raw, overlay)
  const root = raw as Record<string, unknown>

  if (env.PORT !== undefined && env.PORT !== '') {
    const port = Number(env.PORT)
    if (!Number.isInteger(port) || port < 0 || port > 65535) throw new ConfigError('PORT', `must be a port number, got "${env.PORT}"`)
    setPath(root, ['server', 'port'], port)
  }
  const plugins = root.plugins as Record<string, Record<string, unknown>> | undefined
  // Without GATEWAY_PUBLIC_URL, the printed first-start example and invite links point at the port actually used.
  const localUrl = `http://localhost:${(root.server as { port?: unknown } | undefined)?.port ?? 8787}`
  const auth = plugins?.auth
  const bootstrap = ((auth?.config as Record<string, unknown> | undefined)?.bootstrap ?? {}) as Record<string, unknown>
  if (auth !== undefined && (configuredPublicUrl !== null || bootstrap.publicUrl === undefined)) {
    setPath(root, ['plugins', 'auth', 'config', 'bootstrap', 'publicUrl'], configuredPublicUrl ?? localUrl)
  }
  const adminApi = plugins?.['admin-api']
  if (adminApi !== undefined && (configuredPublicUrl !== null || (adminApi.config as Record<string, unknown> | undefined)?.publicUrl === undefined)) {
    setPath(root, ['plugins', 'admin-api', 'config', 'publicUrl'], configuredPublicUrl ?? localUrl)
  }
  const adminKey = env.GATEWAY_BOOTSTRAP_ADMIN_KEY
  if (adminKey !== undefined && adminKey !== '') {
    if (adminKey.length < 16) throw new ConfigError('GATEWAY_BOOTSTRAP_ADMIN_KEY', 'must be at least 16 characters')
    setPath(root, ['plugins', 'auth', 'config', 'bootstrap', 'adminKey'], adminKey)
  }
  if (jwksUrlValue !== null) {
    httpUrl('GATEWAY_JWKS_URL', jwksUrlValue)
    setPath(root, ['plugins', 'auth', 'config', 'bootstrap', 'jwksUrl'], jwksUrlValue)
  }
  if (jwksValue !== null) setPath(root, ['plugins', 'auth', 'config', 'bootstrap', 'jwks'], staticJwks(jwksValue))
  const jwtIssuer = optional(env, 'GATEWAY_JWT_ISSUER')
  const jwtAudience = optional(env, 'GATEWAY_JWT_AUDIENCE')
  if (jwtIssuer !== null || jwtAudience !== null) {
    // They complete the JWT settings a JWKS writes at start; alone they would silently do nothing.
    const bootstrapPath = ['plugins', 'auth', 'config', 'bootstrap']
    if ((getPath(root, [...bootstrapPath, 'jwksUrl']) ?? null) === null && (getPath(root, [...bootstrapPath, 'jwks']) ?? null) === null) {
      throw new ConfigError(jwtIssuer !== null ? 'GATEWAY_JWT_ISSUER' : 'GATEWAY_JWT_AUDIENCE', 'needs GATEWAY_JWKS_URL or GATEWAY_JWKS (the issuer and audience are part of the JWT settings they write)')
    }
    if (jwtIssuer !== null) setPath(root, ['plugins', 'auth', 'config', 'bootstrap', 'jwtIssuer'], jwtIssuer)
    if (jwtAudience !== null) setPath(root, ['plugins', 'auth', 'config', 'bootstrap', 'jwtAudience'], jwtAudiences(jwtAudience))
  }

  const parsed = gatewayConfigSchema.safeParse(root)
  if (!parsed.success) {
    const issue = parsed.error.issues[0]
    throw new ConfigError(issue?.path.map(String).join('.') || 'config', issue?.message ?? 'invalid')
  }
  return {
    config: parsed.data,
    environment: {
      dataDir: env.GATEWAY_DATA_DIR !== undefined && env.GATEWAY_DATA_DIR !== '' ? env.GATEWAY_DATA_DIR : './data',
      allowedCustomHosts: (env.GATEWAY_ALLOWED_CUSTOM_HOSTS ?? '')
        .split(',')
        .map((entry) => entry.trim())
        .filter((entry) => entry.length > 0),
      logLevel: env.GATEWAY_LOG_LEVEL !== undefined && env.GATEWAY_LOG_LEVEL !== '' ? env.GATEWAY_LOG_LEVEL : 'info',
      mongodbUri,
      redisUrl,
      clickhouse,
      masterKey: optional(env, 'GATEWAY_MASTER_KEY'),
      publicUrl: configuredPublicUrl ?? `http://localhost:${parsed.data.server.port}`,
    },
  }
}
