import { describe, expect, it } from 'vitest'
import { passthroughFormat, RouteTable, selectsProvider } from '../../../core/routes.js'

const table = new RouteTable()

function routeOf(method: string, path: string, provider = false): string {
  const lookup = table.lookup(method, path, provider)
  return lookup.kind === 'route' ? `${lookup.match.route.group}:${lookup.match.route.id}` : lookup.kind
}

describe('RouteTable', () => {
  it('serves first-class routes on the data plane whatever the headers', () => {
    expect(routeOf('POST', '/v1/chat/completions')).toBe('inference:chat.completions')
    expect(routeOf('POST', '/v1/audio/transcriptions', true)).toBe('inference:audio.transcriptions')
    expect(routeOf('GET', '/v1/models')).toBe('inference:models.list')
  })

  it('sends other /v1 paths to pass-through when a provider is selected, even if they name an admin route', () => {
    expect(routeOf('POST', '/v1/rerank', true)).toBe('passthrough:passthrough')
    expect(routeOf('POST', '/v1/admin/workspaces', true)).toBe('passthrough:passthrough')
    expect(routeOf('DELETE', '/v1/files/abc', true)).toBe('passthrough:passthrough')
  })

  it('matches the Admin API without a provider selection, with path parameters', () => {
    expect(routeOf('POST', '/v1/admin/workspaces')).toBe('admin:admin.workspaces.create')
    const lookup = table.lookup('GET', '/v1/admin/workspaces/ws-a%20b', false)
    expect(lookup.kind === 'route' && lookup.match.params).toEqual({ workspaceId: 'ws-a b' })
  })

  it('answers 405 for a known admin path with another method, and pass-through (then 400) for unknown /v1 paths', () => {
    expect(routeOf('DELETE', '/v1/admin/workspaces')).toBe('method-not-allowed')
    expect(routeOf('POST', '/v1/unknown')).toBe('passthrough:passthrough')
  })

  it('answers 404 outside /v1 and 405 for other methods', () => {
    expect(routeOf('GET', '/v2/chat')).toBe('not-found')
    expect(routeOf('GET', '/')).toBe('not-found')
    expect(routeOf('PATCH', '/v1/rerank', true)).toBe('method-not-allowed')
    expect(routeOf('GET', '/healthz')).toBe('core')
    expect(routeOf('POST', '/healthz')).toBe('method-not-allowed')
  })

  it('gives each route the format its errors take: pass-through by path, the rest openai', () => {
    const formatOf = (method: string, path: string, provider = true): string => {
      const lookup = table.lookup(method, path, provider)
      return lookup.kind === 'route' ? lookup.match.route.format : lookup.kind
    }
    expect(formatOf('POST', '/v1/chat/completions')).toBe('openai')
    expect(formatOf('POST', '/v1/admin/workspaces', false)).toBe('openai')
    expect(formatOf('POST', '/v1/rerank')).toBe('openai')
    expect(formatOf('POST', '/v1/responses')).toBe('responses')
    expect(formatOf('GET', '/v1/responses/resp_1')).toBe('responses')
    expect(formatOf('POST', '/v1/messages')).toBe('messages')
    expect(formatOf('POST', '/v1/messages/count_tokens')).toBe('messages')
    expect(formatOf('POST', '/v1/messages/', false)).toBe('messages')
    for (const path of ['/v1/messagesx', '/v1/responsesx', '/v1/x/messages', '/v1/message']) expect(passthroughFormat(path), path).toBe('openai')
    const lookup = table.lookup('PUT', '/v1/messages/batches/b1', true)
    expect(lookup.kind === 'route' && lookup.match.route).toMatchObject({ group: 'passthrough', id: 'passthrough', method: 'PUT', format: 'messages' })
  })

  it('recognises provider selection headers', () => {
    expect(selectsProvider({ 'x-gateway-provider': 'openai' })).toBe(true)
    expect(selectsProvider({ 'x-gateway-virtual-key': 'vk' })).toBe(true)
    expect(selectsProvider({ 'x-gateway-config': 'pc-1' })).toBe(true)
    expect(selectsProvider({ authorization: 'Bearer x' })).toBe(false)
  })
})
