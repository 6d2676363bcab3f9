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
    expect(Object.keys(config.plugins).sort()).toEqual(['admin-api', 'audit', 'auth', 'budget', 'cache', 'forward', 'log', 'prompt-render', 'rate-limit', 'routing', 'scope-check', 'virtual-key'])
    expect(environment.dataDir).toBe('./data')
    expect(environment.allowedCustomHosts).toEqual([])
    expect(config.embedded.memoryLimitMb).toBe(128)
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
    expect(configError(() => loadConfig({}, { embedded: { memoryLimitMb: 64 } })).key).toBe('embedded.memoryLimitMb')
    expect(configError(() => loadConfig({ GATEWAY_BOOTSTRAP_ADMIN_KEY: 'short' })).key).toBe('GATEWAY_BOOTSTRAP_ADMIN_KEY')
  })

  it('reads CLICKHOUSE_URL: the path names the database (default gateway), credentials stay in the URL', () => {
    expect(loadConfig({}).environment.clickhouse).toBeNull()
    expect(loadConfig({ CLICKHOUSE_URL: 'http://localhost:8123' }).environment.clickhouse).toEqual({ url: 'http://localhost:8123/', database: 'gateway' })
    expect(loadConfig({ CLICKHOUSE_URL: 'https://u:p%40ss@ch.example:8443/logs_1/' }).environment.clickhouse).toEqual({
      url: 'https://u:p%40ss@ch.example:8443/',
      database: 'logs_1',
    })
    for (const bad of ['localhost:8123', 'tcp://localhost:9000', 'http://localhost:8123/bad-name', 'http://localhost:8123/a/b']) {
      const error = configError(() => loadConfig({ CLICKHOUSE_URL: bad }))
      expect(error.key).toBe('CLICKHOUSE_URL')
      expect(error.message).not.toContain('8123/')
    }
  })

  it('leaves the store URLs null when unset or empty', () => {
    expect(loadConfig({}).environment).toMatchObject({ mongodbUri: null, redisUrl: null })
    expect(loadConfig({ MONGODB_URI: '', REDIS_URL: '' }).environment).toMatchObject({ mongodbUri: null, redisUrl: null })
  })

  it('accepts MONGODB_URI with mongodb:// or mongodb+srv://, several hosts included', () => {
    const uris = ['mongodb://localhost:27017/gateway', 'mongodb://u:p@h1:27017,h2:27017/gw?replicaSet=rs0', 'mongodb+srv://u:p@cluster0.example.net/']
    for (const uri of uris) expect(loadConfig({ MONGODB_URI: uri }).environment.mongodbUri).toBe(uri)
  })

  it('refuses any other MONGODB_URI, naming the variable but not echoing the value', () => {
    for (const uri of ['postgres://u:secret@localhost/db', 'localhost:27017', 'mongodb://', 'MONGODB://x']) {
      const error = configError(() => loadConfig({ MONGODB_URI: uri }))
      expect(error.key).toBe('MONGODB_URI')
      expect(error.message).toContain('mongodb://')
      expect(error.message).not.toContain('secret')
    }
  })

  it('accepts REDIS_URL with redis:// or rediss://', () => {
    for (const url of ['redis://127.0.0.1:6379', 'redis://:pw@redis.internal:6379/2', 'rediss://user:pw@redis.example.com:6380']) {
      expect(loadConfig({ REDIS_URL: url }).environment.redisUrl).toBe(url)
    }
  })

  it('refuses any other REDIS_URL, naming the variable but not echoing the value', () => {
    for (const url of ['http://u:secret@localhost:6379', '127.0.0.1:6379', 'redis://', 'redis-cluster://x']) {
      const error = configError(() => loadConfig({ REDIS_URL: url }))
      expect(error.key).toBe('REDIS_URL')
      expect(error.message).toContain('redis://')
      expect(error.message).not.toContain('secret')
    }
  })

  it('puts GATEWAY_JWKS_URL into the auth bootstrap as jwksUrl', () => {
    const { config } = loadConfig({ GATEWAY_JWKS_URL: 'https://idp.example.com/.well-known/jwks.json' })
    const bootstrap = (config.plugins.auth?.config as { bootstrap: Record<string, unknown> }).bootstrap
    expect(bootstrap.jwksUrl).toBe('https://idp.example.com/.well-known/jwks.json')
    expect(bootstrap).not.toHaveProperty('jwks')
  })

  it('refuses a GATEWAY_JWKS_URL that is not an http(s) URL', () => {
    for (const url of ['idp.example.com/jwks.json', 'ftp://idp.example.com/jwks.json', 'file:///etc/jwks.json']) {
      expect(configError(() => loadConfig({ GATEWAY_JWKS_URL: url })).key).toBe('GATEWAY_JWKS_URL')
    }
  })

  it('puts GATEWAY_JWKS into the auth bootstrap as the parsed key set', () => {
    const jwks = { keys: [{ kty: 'RSA', kid: 'k1', n: 'abc', e: 'AQAB', alg: 'RS256', use: 'sig' }] }
    const { config } = loadConfig({ GATEWAY_JWKS: JSON.stringify(jwks) })
    const bootstrap = (config.plugins.auth?.config as { bootstrap: Record<string, unknown> }).bootstrap
    expect(bootstrap.jwks).toEqual(jwks)
    expect(bootstrap).not.toHaveProperty('jwksUrl')
  })

  it('refuses a GATEWAY_JWKS that is not a JSON key set of the form {"keys":[...]}', () => {
    for (const value of ['{oops', '[]', '{"kty":"RSA"}', '{"keys":{}}', '{"keys":[]}', '{"keys":["k1"]}', 'null']) {
      const error = configError(() => loadConfig({ GATEWAY_JWKS: value }))
      expect(error.key, value).toBe('GATEWAY_JWKS')
    }
  })

  it('refuses GATEWAY_JWKS_URL and GATEWAY_JWKS together', () => {
    const error = configError(() =>
      loadConfig({ GATEWAY_JWKS_URL: 'https://idp.example.com/jwks.json', GATEWAY_JWKS: JSON.stringify({ keys: [{ kty: 'RSA' }] }) }),
    )
    expect(error.message).toContain('GATEWAY_JWKS_URL')
    expect(error.message).toContain('GATEWAY_JWKS ')
  })

  it('puts GATEWAY_JWT_ISSUER and GATEWAY_JWT_AUDIENCE (a comma list) into the auth bootstrap next to the JWKS', () => {
    const { config } = loadConfig({
      GATEWAY_JWKS_URL: 'https://idp.example.com/jwks.json',
      GATEWAY_JWT_ISSUER: 'https://idp.example.com/',
      GATEWAY_JWT_AUDIENCE: ' gateway, gateway-eu ,,gateway',
    })
    const bootstrap = (config.plugins.auth?.config as { bootstrap: Record<string, unknown> }).bootstrap
    expect(bootstrap.jwtIssuer).toBe('https://idp.example.com/')
    expect(bootstrap.jwtAudience).toEqual(['gateway', 'gateway-eu'])
    // A JWKS from the config file counts too.
    const fromFile = loadConfig({ GATEWAY_JWT_AUDIENCE: 'gateway' }, { plugins: { auth: { config: { bootstrap: { jwksUrl: 'https://idp.example.com/jwks.json' } } } } })
    expect((fromFile.config.plugins.auth?.config as { bootstrap: Record<string, unknown> }).bootstrap.jwtAudience).toEqual(['gateway'])
  })

  it('refuses GATEWAY_JWT_ISSUER or GATEWAY_JWT_AUDIENCE without a JWKS, and an audience list naming nothing', () => {
    const issuer = configError(() => loadConfig({ GATEWAY_JWT_ISSUER: 'https://idp.example.com/' }))
    expect(issuer.key).toBe('GATEWAY_JWT_ISSUER')
    expect(issuer.message).toContain('GATEWAY_JWKS_URL or GATEWAY_JWKS')
    expect(configError(() => loadConfig({ GATEWAY_JWT_AUDIENCE: 'gateway' })).key).toBe('GATEWAY_JWT_AUDIENCE')
    expect(configError(() => loadConfig({ GATEWAY_JWKS_URL: 'https://idp.example.com/jwks.json', GATEWAY_JWT_AUDIENCE: ' , ' })).key).toBe('GATEWAY_JWT_AUDIENCE')
  })

  it('defaults publicUrl to http://localhost:<port>', () => {
    expect(loadConfig({}).environment.publicUrl).toBe('http://localhost:8787')
    expect(loadConfig({ PORT: '9100' }).environment.publicUrl).toBe('http://localhost:9100')
    expect(loadConfig({}, { server: { port: 9200 } }).environment.publicUrl).toBe('http://localhost:9200')
  })

  it('sets the same default into the auth bootstrap banner and the admin-api invite links, unless the config has its own', () => {
    const { config } = loadConfig({ PORT: '9100' })
    expect((config.plugins.auth?.config as { bootstrap: { publicUrl: string } }).bootstrap.publicUrl).toBe('http://localhost:9100')
    expect((config.plugins['admin-api']?.config as { publicUrl: string }).publicUrl).toBe('http://localhost:9100')
    const own = loadConfig({}, { plugins: { 'admin-api': { config: { publicUrl: 'https://from-file.example.com' } } } })
    expect((own.config.plugins['admin-api']?.config as { publicUrl: string }).publicUrl).toBe('https://from-file.example.com')
  })

  it('takes GATEWAY_PUBLIC_URL without its trailing slash, for invite links and the bootstrap banner', () => {
    const overlay = { plugins: { 'admin-api': { config: { publicUrl: 'https://from-file.example.com' } } } }
    const { config, environment } = loadConfig({ GATEWAY_PUBLIC_URL: 'https://gateway.example.com/llm/', PORT: '9100' }, overlay)
    expect(environment.publicUrl).toBe('https://gateway.example.com/llm')
    expect((config.plugins.auth?.config as { bootstrap: { publicUrl: string } }).bootstrap.publicUrl).toBe('https://gateway.example.com/llm')
    // The environment wins over files, as everywhere else.
    expect((config.plugins['admin-api']?.config as { publicUrl: string }).publicUrl).toBe('https://gateway.example.com/llm')
    expect(loadConfig({ GATEWAY_PUBLIC_URL: 'http://gw.internal:8080' }).environment.publicUrl).toBe('http://gw.internal:8080')
    expect(loadConfig({ GATEWAY_PUBLIC_URL: 'https://gateway.example.com/' }).environment.publicUrl).toBe('https://gateway.example.com')
  })

  it('refuses a GATEWAY_PUBLIC_URL that is not a plain http(s) base URL', () => {
    const bad = ['gateway.example.com', 'ftp://gateway.example.com', 'https://gateway.example.com/?a=1', 'https://gateway.example.com/#x', 'https://u:p@gateway.example.com']
    for (const url of bad) expect(configError(() => loadConfig({ GATEWAY_PUBLIC_URL: url })).key, url).toBe('GATEWAY_PUBLIC_URL')
  })
})

describe('mergeConfig', () => {
  it('merges objects key by key and replaces arrays and scalars', () => {
    expect(mergeConfig({ a: { b: 1, c: [1, 2] }, d: 1 }, { a: { c: [3] }, e: 2 })).toEqual({ a: { b: 1, c: [3] }, d: 1, e: 2 })
  })
})
