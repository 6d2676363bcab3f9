import { describe, expect, it } from 'vitest'
import { auditEntryOf, maskSecrets, MAX_AUDIT_BODY_CHARS, REDACTED, truncatedBody } from '../../../core/audit.js'
import { ClientAbort, RequestContext, type Principal } from '../../../core/context.js'
import { ADMIN_ROUTES, type RouteSpec } from '../../../core/routes.js'

function route(id: string): RouteSpec {
  const found = ADMIN_ROUTES.find((candidate) => candidate.id === id)
  if (found === undefined) throw new Error(`no route ${id}`)
  return found
}

function makeCtx(routeId: string, path: string, params: Record<string, string> = {}, query = ''): RequestContext {
  const spec = route(routeId)
  return new RequestContext({
    requestId: 'req-1',
    traceId: 'trace-1',
    receivedAt: Date.parse('2026-01-02T03:04:05.678Z'),
    startedAt: 0,
    method: spec.method,
    path,
    query,
    headers: {},
    clientIp: '10.0.0.7',
    route: spec,
    params,
    signal: new ClientAbort(),
  })
}

const serviceKey: Principal = {
  kind: 'api-key',
  keyId: 'key-1',
  keyType: 'workspace-service',
  organisationId: 'org-1',
  workspaceId: 'ws-uuid',
  userId: null,
  scopes: new Set(),
  credentialHeader: 'x-gateway-api-key',
  limitSubjects: [],
}

describe('maskSecrets', () => {
  it('masks key fields, replaces passwords, tokens and secrets whole, at any depth, and leaves the rest alone', () => {
    const masked = maskSecrets({
      name: 'prod',
      key: 'sk-live-abcdefghijklmnop',
      nested: { api_key: 'abcdefghijkl', aws_secret_access_key: 'AKIAxxxxxxxxxxxx', list: [{ password: 'hunter2hunter2' }] },
      key_transition_period_ms: 1_800_000,
      scopes: ['completions.write'],
      client_token: 42,
    }) as Record<string, any>
    expect(masked.name).toBe('prod')
    expect(masked.key).toBe('sk********nop')
    expect(masked.nested.api_key).toBe('ab********jkl')
    expect(masked.nested.aws_secret_access_key).toBe(REDACTED)
    expect(masked.nested.list[0].password).toBe(REDACTED)
    expect(masked.key_transition_period_ms).toBe(1_800_000)
    expect(masked.scopes).toEqual(['completions.write'])
    expect(masked.client_token).toBe(REDACTED)
  })

  it('never keeps a character of a password, token or secret, whatever its spelling', () => {
    const masked = maskSecrets({
      password: 'password123',
      newPassword: 'correct horse',
      sessionToken: 'tok-1234567890',
      refresh_token: 'rt-1234567890',
      client_secret: 'cs-1234567890',
      authorization: 'Bearer abcdefghijkl',
      serviceAccountJson: '{"private_key":"-----BEGIN"}',
    }) as Record<string, unknown>
    for (const value of Object.values(masked)) expect(value).toBe(REDACTED)
  })

  it('masks gateway secrets wherever they appear', () => {
    const secret = 'gw-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA'
    expect(JSON.stringify(maskSecrets({ description: secret, notes: [secret] }))).not.toContain(secret)
  })

  it("keeps a body's own __proto__ field as data, masked like any other, without touching the copy's prototype", () => {
    const body = JSON.parse('{"__proto__":{"password":"hunter2","note":"kept"},"name":"x"}') as unknown
    const masked = maskSecrets(body) as Record<string, unknown>
    expect(Object.getPrototypeOf(masked)).toBe(Object.prototype)
    const text = JSON.stringify(masked)
    expect(text).toContain('"__proto__":{"password":"[redacted]","note":"kept"}')
    expect(text).not.toContain('hunter2')
    expect(({} as Record<string, unknown>).note).toBeUndefined()
  })

  it('survives hostile depth', () => {
    let deep: unknown = 'x'
    for (let index = 0; index < 1000; index++) deep = { next: deep }
    expect(() => JSON.stringify(maskSecrets(deep))).not.toThrow()
  })
})

describe('auditEntryOf', () => {
  it('records who, what, where, the masked body and the query', () => {
    const ctx = makeCtx('api-keys.update', '/v1/api-keys/k-9', { apiKeyId: 'k-9' }, 'a=1&b=two')
    ctx.principal = serviceKey
    ctx.body = { name: 'renamed', key: 'gw-SECRETSECRETSECRETSECRET' }
    const entry = auditEntryOf(ctx, { status: 200 })
    expect(entry).toMatchObject({
      timestamp: '2026-01-02T03:04:05.678Z',
      organisationId: 'org-1',
      workspaceId: 'ws-uuid',
      userId: 'key-1',
      userType: 'api_key',
      method: 'PUT',
      uri: '/v1/api-keys/k-9?a=1&b=two',
      requestId: 'req-1',
      queryParams: '{"a":"1","b":"two"}',
      responseStatusCode: 200,
      resourceType: 'api_key',
      action: 'update',
      resourceId: 'k-9',
      clientIp: '10.0.0.7',
    })
    expect(entry.requestBody).not.toContain('SECRETSECRET')
    expect(JSON.parse(entry.requestBody ?? '{}').name).toBe('renamed')
  })

  it('attributes a workspace user key to its user and names the key it came through', () => {
    const ctx = makeCtx('admin.workspaces.update', '/v1/admin/workspaces/ws-a', { workspaceId: 'ws-a' })
    ctx.principal = { ...serviceKey, keyType: 'workspace-user', userId: 'user-7' }
    expect(auditEntryOf(ctx, { status: 403 })).toMatchObject({ userId: 'user-7', userType: 'user', apiKeyId: 'key-1', responseStatusCode: 403, resourceId: 'ws-a' })
  })

  it('names the key of a service key, and none for a JWT or an unauthenticated caller', () => {
    const ctx = makeCtx('admin.workspaces.update', '/v1/admin/workspaces/ws-a', { workspaceId: 'ws-a' })
    ctx.principal = serviceKey
    expect(auditEntryOf(ctx, { status: 200 })).toMatchObject({ userId: 'key-1', userType: 'api_key', apiKeyId: 'key-1' })
    ctx.principal = { ...serviceKey, kind: 'jwt', keyId: 'alice@example.test' }
    expect(auditEntryOf(ctx, { status: 200 })).toMatchObject({ userId: 'alice@example.test', userType: 'user', apiKeyId: null })
    ctx.principal = null
    expect(auditEntryOf(ctx, { status: 401 })).toMatchObject({ userId: null, apiKeyId: null })
  })

  it('keeps at most 16 KiB of a body, as JSON, with a marker saying how long it was', () => {
    const ctx = makeCtx('admin.workspaces.update', '/v1/admin/workspaces/ws-a', { workspaceId: 'ws-a' })
    ctx.principal = serviceKey
    ctx.body = { description: 'x'.repeat(9 * 1024 * 1024) }
    const entry = auditEntryOf(ctx, { status: 400 })
    expect(entry.requestBody?.length).toBeLessThanOrEqual(MAX_AUDIT_BODY_CHARS)
    const stored = JSON.parse(entry.requestBody ?? '') as string
    expect(stored.startsWith(`[truncated: ${9 * 1024 * 1024 + '{"description":""}'.length} characters] {"description":"xxx`)).toBe(true)
    ctx.body = { description: 'short' }
    expect(auditEntryOf(ctx, { status: 400 }).requestBody).toBe('{"description":"short"}')
  })
})

describe('truncatedBody', () => {
  it('stays within the bound when escaping lengthens the kept text', () => {
    for (const filler of ['"', '\\', '\u0001', '😀']) {
      const text = JSON.stringify({ note: filler.repeat(20_000) })
      const stored = truncatedBody(text)
      expect(stored.length).toBeLessThanOrEqual(MAX_AUDIT_BODY_CHARS)
      expect(stored.length).toBeGreaterThan(MAX_AUDIT_BODY_CHARS / 4)
      expect(() => JSON.parse(stored)).not.toThrow()
    }
  })

  it('leaves a body of exactly the bound alone', () => {
    const text = JSON.stringify({ note: 'y'.repeat(MAX_AUDIT_BODY_CHARS - 11) })
    expect(text.length).toBe(MAX_AUDIT_BODY_CHARS)
    expect(truncatedBody(text)).toBe(text)
  })

  it('masks the invite token in the uri of an unauthenticated acceptance', () => {
    const token = 'abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG'
    const ctx = makeCtx('invites.accept', `/v1/invites/${token}`, { token })
    const entry = auditEntryOf(ctx, { status: 201, organisationId: 'org-1', userId: 'user-new', resourceId: 'invite-1' })
    expect(entry.uri).not.toContain(token)
    expect(entry).toMatchObject({ organisationId: 'org-1', userId: 'user-new', userType: 'user', resourceType: 'invite', action: 'accept' })
  })
})
