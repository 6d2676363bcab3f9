import { describe, expect, it } from 'vitest'
import { authConfigSchema } from '../../../plugins/auth/config.js'

describe('auth config', () => {
  it('defaults to no bootstrap JWKS and bounded JWT caches', () => {
    const parsed = authConfigSchema.safeParse({})
    expect(parsed.success).toBe(true)
    if (!parsed.success) return
    expect(parsed.data.bootstrap.jwksUrl).toBeNull()
    expect(parsed.data.bootstrap.jwks).toBeNull()
    expect(parsed.data.jwt).toEqual({ jwksCacheMaxAgeMs: 600_000, jwksCooldownMs: 30_000, jwksTimeoutMs: 5_000, maxTokenCacheEntries: 10_000 })
  })

  it('accepts a JWKS URL or a static JWKS', () => {
    const url = authConfigSchema.safeParse({ bootstrap: { jwksUrl: 'https://issuer.example/.well-known/jwks.json' } })
    expect(url.success && url.data.bootstrap.jwksUrl).toBe('https://issuer.example/.well-known/jwks.json')
    const jwks = { keys: [{ kty: 'RSA', kid: 'k1', n: 'abc', e: 'AQAB' }] }
    const local = authConfigSchema.safeParse({ bootstrap: { jwks } })
    expect(local.success && local.data.bootstrap.jwks).toEqual(jwks)
  })

  it('refuses a non-http JWKS URL, a JWKS without keys, and both at once', () => {
    expect(authConfigSchema.safeParse({ bootstrap: { jwksUrl: 'ftp://issuer.example/jwks' } }).success).toBe(false)
    expect(authConfigSchema.safeParse({ bootstrap: { jwksUrl: 'not a url' } }).success).toBe(false)
    expect(authConfigSchema.safeParse({ bootstrap: { jwks: { nokeys: [] } } }).success).toBe(false)
    const both = authConfigSchema.safeParse({ bootstrap: { jwksUrl: 'https://issuer.example/jwks', jwks: { keys: [] } } })
    expect(both.success).toBe(false)
    if (!both.success) expect(both.error.issues[0]?.message).toContain('not both')
  })

  it('takes a JWT issuer and audiences only together with a JWKS', () => {
    const parsed = authConfigSchema.safeParse({ bootstrap: { jwksUrl: 'https://issuer.example/jwks', jwtIssuer: 'https://issuer.example/', jwtAudience: ['gateway'] } })
    expect(parsed.success && parsed.data.bootstrap).toMatchObject({ jwtIssuer: 'https://issuer.example/', jwtAudience: ['gateway'] })
    const defaults = authConfigSchema.safeParse({})
    expect(defaults.success && defaults.data.bootstrap).toMatchObject({ jwtIssuer: null, jwtAudience: null })
    for (const alone of [{ jwtIssuer: 'https://issuer.example/' }, { jwtAudience: ['gateway'] }]) {
      const refused = authConfigSchema.safeParse({ bootstrap: alone })
      expect(refused.success).toBe(false)
      if (!refused.success) expect(refused.error.issues[0]?.message).toContain('GATEWAY_JWKS_URL or GATEWAY_JWKS')
    }
    expect(authConfigSchema.safeParse({ bootstrap: { jwksUrl: 'https://issuer.example/jwks', jwtIssuer: '' } }).success).toBe(false)
    expect(authConfigSchema.safeParse({ bootstrap: { jwksUrl: 'https://issuer.example/jwks', jwtAudience: [] } }).success).toBe(false)
  })
})
