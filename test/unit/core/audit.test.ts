import { describe, expect, it } from 'vitest'
import { auditEntryOf, maskSecrets } from '../../../core/audit.js'
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
  it('masks credential fields at any depth and leaves the rest alone', () => {
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
    expect(masked.nested.aws_secret_access_key).toBe('AK********xxx')
    expect(masked.nested.list[0].password).toBe('hu********er2')
    expect(masked.key_transition_period_ms).toBe(1_800_000)
    expect(masked.scopes).toEqual(['completions.write'])
    expect(masked.client_token).toBe('********')
  })

  it('masks gateway secrets wherever they appear', () => {
    const secret = 'gw-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA'
    expect(JSON.stringify(maskSecrets({ description: secret, notes: [secret] }))).not.toContain(secret)
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

  it('attributes a workspace user key to its user', () => {
    const ctx = makeCtx('admin.workspaces.update', '/v1/admin/workspaces/ws-a', { workspaceId: 'ws-a' })
    ctx.principal = { ...serviceKey, keyType: 'workspace-user', userId: 'user-7' }
    expect(auditEntryOf(ctx, { status: 403 })).toMatchObject({ userId: 'user-7', userType: 'user', responseStatusCode: 403, resourceId: 'ws-a' })
  })

  it('masks the invite token in the uri of an unauthenticated acceptance', () => {
    const token = 'abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG'
    const ctx = makeCtx('invites.accept', `/v1/invites/${token}`, { token })
    const entry = auditEntryOf(ctx, { status: 201, organisationId: 'org-1', userId: 'user-new', resourceId: 'invite-1' })
    expect(entry.uri).not.toContain(token)
    expect(entry).toMatchObject({ organisationId: 'org-1', userId: 'user-new', userType: 'user', resourceType: 'invite', action: 'accept' })
  })
})
