import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { loadConfig, mergeConfig } from '../../../config/load.js'
import { ConfigError } from '../../../core/registry.js'

function overlayFile(content: string): string {
  const path = join(mkdtempSync(join(tmpdir(), 'gw-config-')), 'overlay.json')
  writeFileSync(path, content)
  return path
}

function configError(run: () => unknown): ConfigError {
  try {
    run()
  } catch (error) {
    if (error instanceof ConfigError) return error
    throw error
  }
  throw new Error('expected a ConfigError')
}

describe('loadConfig', () => {
  it('uses the defaults: every plugin listed, port 8787, ./data', () => {
    const { config, environment } = loadConfig({})
    expect(config.server.port).toBe(8787)
    expect(Object.keys(config.plugins).sort()).toEqual(['admin-api', 'auth', 'forward', 'log', 'scope-check'])
    expect(environment.dataDir).toBe('./data')
    expect(environment.allowedCustomHosts).toEqual([])
  })

  it('applies the GATEWAY_CONFIG overlay, then the environment', () => {
    const path = overlayFile(JSON.stringify({ server: { port: 9000 }, plugins: { log: { enabled: false } } }))
    const { config, environment } = loadConfig({
      GATEWAY_CONFIG: path,
      PORT: '9100',
      GATEWAY_DATA_DIR: '/var/gw',
      GATEWAY_ALLOWED_CUSTOM_HOSTS: ' 127.0.0.1, 10.0.0.0/8 ,',
      GATEWAY_BOOTSTRAP_ADMIN_KEY: 'a-long-enough-admin-key',
    })
    expect(config.server.port).toBe(9100)
    expect(config.server.maxJsonBodyBytes).toBe(10 * 1024 * 1024)
    expect(config.plugins.log).toEqual({ enabled: false, priority: 10 })
    expect(environment.dataDir).toBe('/var/gw')
    expect(environment.allowedCustomHosts).toEqual(['127.0.0.1', '10.0.0.0/8'])
    expect((config.plugins.auth?.config as { bootstrap: { adminKey: string; publicUrl: string } }).bootstrap).toEqual({
      adminKey: 'a-long-enough-admin-key',
      publicUrl: 'http://localhost:9100',
    })
  })

  it('names the key of every mistake', () => {
    expect(configError(() => loadConfig({ PORT: 'eighty' })).key).toBe('PORT')
    expect(configError(() => loadConfig({ GATEWAY_CONFIG: '/nonexistent/overlay.json' })).key).toBe('GATEWAY_CONFIG')
    expect(configError(() => loadConfig({ GATEWAY_CONFIG: overlayFile('{oops') })).key).toBe('GATEWAY_CONFIG')
    expect(configError(() => loadConfig({}, { server: { port: 'x' } })).key).toBe('server.port')
    expect(configError(() => loadConfig({}, { sever: {} })).message).toContain('sever')
    expect(configError(() => loadConfig({ GATEWAY_BOOTSTRAP_ADMIN_KEY: 'short' })).key).toBe('GATEWAY_BOOTSTRAP_ADMIN_KEY')
  })

  it('refuses store URLs this version cannot use instead of silently ignoring them', () => {
    expect(configError(() => loadConfig({ MONGODB_URI: 'mongodb://localhost' })).key).toBe('MONGODB_URI')
    expect(configError(() => loadConfig({ CLICKHOUSE_URL: 'http://localhost:8123' })).key).toBe('CLICKHOUSE_URL')
  })
})

describe('mergeConfig', () => {
  it('merges objects key by key and replaces arrays and scalars', () => {
    expect(mergeConfig({ a: { b: 1, c: [1, 2] }, d: 1 }, { a: { c: [3] }, e: 2 })).toEqual({ a: { b: 1, c: [3] }, d: 1, e: 2 })
  })
})
