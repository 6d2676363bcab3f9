/**
 * Loads the configuration: `config/default.json`, then the overlay file named by `GATEWAY_CONFIG`,
 * then an in-code overlay (tests), then the environment. Objects merge key by key; arrays and
 * scalars replace. Every mistake is a `ConfigError` naming the key.
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

/** Stores this version cannot use yet: refusing beats silently running on the embedded store. */
const NOT_YET_SUPPORTED = ['MONGODB_URI', 'REDIS_URL', 'CLICKHOUSE_URL'] as const

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

export function loadConfig(env: Environment, overlay?: unknown): LoadedConfig {
  for (const name of NOT_YET_SUPPORTED) {
    if (env[name] !== undefined && env[name] !== '') {
      throw new ConfigError(name, 'this version runs on the embedded stores only (that adapter is not available yet); unset it')
    }
  }
  let raw = structuredClone(defaults) as unknown
  if (env.GATEWAY_CONFIG !== undefined && env.GATEWAY_CONFIG !== '') raw = mergeConfig(raw, readOverlayFile(env.GATEWAY_CONFIG))
  if (overlay !== undefined) raw = mergeConfig(raw, overlay)
  const root = raw as Record<string, unknown>

  if (env.PORT !== undefined && env.PORT !== '') {
    const port = Number(env.PORT)
    if (!Number.isInteger(port) || port < 0 || port > 65535) throw new ConfigError('PORT', `must be a port number, got "${env.PORT}"`)
    setPath(root, ['server', 'port'], port)
  }
  const auth = (root.plugins as Record<string, Record<string, unknown>> | undefined)?.auth
  const bootstrap = ((auth?.config as Record<string, unknown> | undefined)?.bootstrap ?? {}) as Record<string, unknown>
  if (auth !== undefined && bootstrap.publicUrl === undefined) {
    // The printed first-start example should point at the port actually used.
    setPath(root, ['plugins', 'auth', 'config', 'bootstrap', 'publicUrl'], `http://localhost:${(root.server as { port?: unknown } | undefined)?.port ?? 8787}`)
  }
  const adminKey = env.GATEWAY_BOOTSTRAP_ADMIN_KEY
  if (adminKey !== undefined && adminKey !== '') {
    if (adminKey.length < 16) throw new ConfigError('GATEWAY_BOOTSTRAP_ADMIN_KEY', 'must be at least 16 characters')
    setPath(root, ['plugins', 'auth', 'config', 'bootstrap', 'adminKey'], adminKey)
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
    },
  }
}
