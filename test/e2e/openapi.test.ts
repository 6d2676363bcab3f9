/**
 * `GET /v1/openapi.json` on the real gateway: public (no key), JSON, valid OpenAPI, and describing
 * every Admin API route.
 */
import { Validator } from '@seriousme/openapi-schema-validator'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ADMIN_ROUTES } from '../../core/routes.js'
import { startTestGateway, type TestGateway } from '../helpers/gateway.js'

describe('GET /v1/openapi.json', () => {
  let gw: TestGateway

  beforeAll(async () => {
    gw = await startTestGateway()
  })

  afterAll(async () => {
    await gw?.close()
  })

  it('answers without an API key with a valid OpenAPI document of every Admin API operation', async () => {
    const response = await fetch(`${gw.url}/v1/openapi.json`)
    expect(response.status).toBe(200)
    expect(response.headers.get('content-type')).toContain('application/json')
    const document = (await response.json()) as { openapi: string; paths: Record<string, Record<string, { operationId: string }>> }
    const result = await new Validator().validate(document)
    expect(result.errors ?? [], JSON.stringify(result.errors)).toEqual([])
    expect(result.valid).toBe(true)
    expect(document.openapi).toMatch(/^3\./)
    const operationIds = Object.values(document.paths).flatMap((path) => Object.values(path).map((operation) => operation.operationId))
    expect(operationIds.sort()).toEqual(ADMIN_ROUTES.map((route) => route.id).sort())
  })

  it('ignores a bad API key (the route is public) and serves the same text every time', async () => {
    const first = await fetch(`${gw.url}/v1/openapi.json`, { headers: { 'x-gateway-api-key': 'gw-not-a-real-key-0123456789abcdef' } })
    expect(first.status).toBe(200)
    const second = await fetch(`${gw.url}/v1/openapi.json`)
    expect(await first.text()).toBe(await second.text())
  })

  it('is not recorded in the audit log (it changes nothing)', async () => {
    const logs = await gw.admin('GET', '/v1/audit-logs')
    expect(logs.status).toBe(200)
    expect(logs.body.data.filter((entry: { uri: string }) => entry.uri.startsWith('/v1/openapi.json'))).toEqual([])
  })
})
