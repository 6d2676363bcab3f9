/**
 * The Admin API's OpenAPI document (plugins/admin-api/openapi.ts): valid OpenAPI, one operation per
 * route of ADMIN_ROUTES, bodies and query parameters generated from the handlers' zod schemas.
 * A new route without an entry in OPERATION_SCHEMAS, or a JSON-body route without a body schema,
 * fails here.
 */
import { Validator } from '@seriousme/openapi-schema-validator'
import { describe, expect, it } from 'vitest'
import { z } from 'zod'
import { ADMIN_ROUTES } from '../../../core/routes.js'
import {
  buildOpenApiDocument,
  OPERATION_SCHEMAS,
  openApiText,
  publicOpenApiHandlers,
} from '../../../plugins/admin-api/openapi.js'

type Json = Record<string, any>

const document = buildOpenApiDocument() as Json

function operationOf(pattern: string, method: string): Json | undefined {
  return document.paths[pattern.replace(/:([A-Za-z0-9_]+)/g, '{$1}')]?.[method.toLowerCase()]
}

describe('OpenAPI document', () => {
  it('is a valid OpenAPI 3.0 document whose references all resolve', async () => {
    const validator = new Validator()
    const result = await validator.validate(JSON.parse(openApiText()))
    expect(result.errors ?? [], JSON.stringify(result.errors, null, 2)).toEqual([])
    expect(result.valid).toBe(true)
    expect(validator.version).toBe('3.0')
    expect(() => validator.resolveRefs()).not.toThrow()
  })

  it('has exactly one entry in OPERATION_SCHEMAS per Admin API route', () => {
    const routeIds = ADMIN_ROUTES.map((route) => route.id).sort()
    expect(new Set(routeIds).size).toBe(routeIds.length)
    expect(Object.keys(OPERATION_SCHEMAS).sort()).toEqual(routeIds)
  })

  it('describes every route: path, method, operationId, scopes and security', () => {
    let operations = 0
    for (const path of Object.values(document.paths as Record<string, Json>)) operations += Object.keys(path).length
    expect(operations).toBe(ADMIN_ROUTES.length)
    for (const route of ADMIN_ROUTES) {
      const operation = operationOf(route.pattern, route.method)
      expect(operation, `${route.method} ${route.pattern}`).toBeDefined()
      expect(operation?.operationId).toBe(route.id)
      expect(operation?.summary).toBe(OPERATION_SCHEMAS[route.id]?.summary)
      expect(operation?.['x-gateway-scopes']).toEqual(route.scopes)
      for (const scope of route.scopes) expect(operation?.description).toContain(scope)
      expect(operation?.security).toEqual(route.public ? [] : [{ apiKey: [] }, { bearer: [] }])
      const pathParams = [...route.pattern.matchAll(/:([A-Za-z0-9_]+)/g)].map((match) => match[1])
      const declared = (operation?.parameters ?? []).filter((param: Json) => param.in === 'path').map((param: Json) => param.name)
      expect(declared).toEqual(pathParams)
    }
    expect(document.components.securitySchemes.apiKey).toEqual(expect.objectContaining({ type: 'apiKey', in: 'header', name: 'x-gateway-api-key' }))
  })

  it('generates request bodies from the handlers’ schemas; every JSON-body route has one', () => {
    for (const route of ADMIN_ROUTES) {
      const operation = operationOf(route.pattern, route.method) as Json
      const schemas = OPERATION_SCHEMAS[route.id]
      if (route.body === 'json') {
        expect(schemas?.body, `${route.id} needs a body schema`).toBeDefined()
        expect(operation.requestBody?.required, route.id).toBe(true)
      }
      if (route.body === 'none') expect(operation.requestBody, route.id).toBeUndefined()
      if (schemas?.body !== undefined && route.body !== 'none') {
        expect(operation.requestBody.content['application/json'].schema).toEqual(z.toJSONSchema(schemas.body, { target: 'openapi-3.0', io: 'input', unrepresentable: 'any' }))
      }
    }
    const createKey = operationOf('/v1/api-keys/workspace/service', 'POST')?.requestBody.content['application/json'].schema
    expect(createKey.required).toEqual(expect.arrayContaining(['name', 'scopes']))
    expect(createKey.additionalProperties).toBe(false)
  })

  it('lists each property of a query schema as a query parameter', () => {
    for (const route of ADMIN_ROUTES) {
      const query = OPERATION_SCHEMAS[route.id]?.query
      if (query === undefined) continue
      const properties = Object.keys((z.toJSONSchema(query, { target: 'openapi-3.0', io: 'input' }) as Json).properties)
      const operation = operationOf(route.pattern, route.method) as Json
      const declared = operation.parameters.filter((param: Json) => param.in === 'query').map((param: Json) => param.name)
      expect(declared, route.id).toEqual(properties)
    }
    const auditQuery = operationOf('/v1/audit-logs', 'GET')?.parameters as Json[]
    expect(auditQuery.map((param) => param.name)).toEqual(
      expect.arrayContaining(['current_page', 'page_size', 'start_time', 'end_time', 'method', 'uri', 'user_id', 'workspace_id', 'resource_type', 'action', 'response_status_code']),
    )
    expect(auditQuery.find((param) => param.name === 'method')?.schema).toEqual({ type: 'string', enum: ['POST', 'PUT', 'DELETE'] })
  })

  it('documents errors in the control-plane shape', () => {
    const error = document.components.schemas.Error
    expect(error.required).toEqual(['success', 'data'])
    expect(error.properties.data.properties.errorCode.enum).toEqual(expect.arrayContaining(['AB01', 'AB03', 'AB04', 'AB05', 'AB07', 'AB08']))
    const createWorkspace = operationOf('/v1/admin/workspaces', 'POST') as Json
    for (const status of ['400', '401', '403', '409', '500']) {
      expect(createWorkspace.responses[status]).toEqual({ $ref: `#/components/responses/Error${status}` })
    }
    const publicRoute = operationOf('/v1/openapi.json', 'GET') as Json
    expect(publicRoute.responses['401']).toBeUndefined()
  })

  it('is serialised once and served as JSON', async () => {
    expect(openApiText()).toBe(openApiText())
    const handler = publicOpenApiHandlers['openapi.get']
    expect(handler).toBeDefined()
    const reply = await handler?.({ ctx: null, deps: null } as never)
    expect(reply).toMatchObject({ status: 200, body: openApiText() })
    expect((reply as { headers: ReadonlyArray<readonly [string, string]> }).headers).toContainEqual(['content-type', 'application/json'])
  })
})
