/**
 * Boots the real gateway in-process on a free port (uWS, real sockets) with a fresh data directory,
 * and creates data-plane keys through its own Admin API, as a user would.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startGateway, type GatewayHandle } from '../../config/boot.js'

export const TEST_ADMIN_KEY = 'gw-test-admin-key-0123456789abcdef'

export interface TestGateway extends GatewayHandle {
  readonly adminKey: string
  readonly dataDir: string
  /** POST/GET/PUT/DELETE to the Admin API with the admin key (or another key); returns status and parsed JSON. */
  admin(method: string, path: string, body?: unknown, key?: string): Promise<{ status: number; body: any }>
  /** Creates a workspace and a workspace service key with `scopes`; returns the secret and ids. */
  workspaceKey(scopes?: readonly string[]): Promise<{ key: string; keyId: string; workspaceId: string }>
  /** Stops the gateway and removes its data directory. */
  close(): Promise<void>
}

export interface TestGatewayOptions {
  /** Config overlay (merged over config/default.json). */
  readonly overlay?: unknown
  /** Extra environment; `GATEWAY_ALLOWED_CUSTOM_HOSTS` defaults to `127.0.0.1` so the loopback mock is reachable. */
  readonly env?: Record<string, string>
}

export async function startTestGateway(options: TestGatewayOptions = {}): Promise<TestGateway> {
  const dataDir = mkdtempSync(join(tmpdir(), 'gw-e2e-'))
  const handle = await startGateway({
    env: {
      PORT: '0',
      GATEWAY_DATA_DIR: dataDir,
      GATEWAY_BOOTSTRAP_ADMIN_KEY: TEST_ADMIN_KEY,
      GATEWAY_ALLOWED_CUSTOM_HOSTS: '127.0.0.1',
      GATEWAY_LOG_LEVEL: 'silent',
      ...options.env,
    },
    overlay: mergeHost(options.overlay),
  })

  async function admin(method: string, path: string, body?: unknown, key = TEST_ADMIN_KEY) {
    const response = await fetch(`${handle.url}${path}`, {
      method,
      headers: { 'x-gateway-api-key': key, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    })
    const text = await response.text()
    return { status: response.status, body: text.length > 0 ? JSON.parse(text) : null }
  }

  return {
    ...handle,
    stop: () => handle.stop(),
    adminKey: TEST_ADMIN_KEY,
    dataDir,
    admin,
    async workspaceKey(scopes = ['completions.write']) {
      const workspace = await admin('POST', '/v1/admin/workspaces', { name: `ws-${Math.random().toString(36).slice(2, 8)}` })
      if (workspace.status !== 200) throw new Error(`creating a workspace failed: ${JSON.stringify(workspace.body)}`)
      const key = await admin('POST', '/v1/api-keys/workspace/service', { name: 'test', workspace_id: workspace.body.id, scopes })
      if (key.status !== 200) throw new Error(`creating a key failed: ${JSON.stringify(key.body)}`)
      return { key: key.body.key, keyId: key.body.id, workspaceId: workspace.body.id }
    },
    async close() {
      await handle.stop()
      rmSync(dataDir, { recursive: true, force: true })
    },
  }
}

/** Tests listen on loopback only. */
function mergeHost(overlay: unknown): unknown {
  const base = { server: { host: '127.0.0.1' } }
  if (overlay === undefined || overlay === null || typeof overlay !== 'object') return base
  const given = overlay as Record<string, unknown>
  return { ...given, server: { ...base.server, ...(given.server as object | undefined) } }
}

/** The small chat completion most data-plane tests send. */
export const CHAT_BODY = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Hi' }] }

/**
 * Headers of a data-plane call with the gateway key `key` to the OpenAI-shaped provider at
 * `providerUrl` (a custom host, e.g. the loopback mock), plus `extra`.
 */
export function dataPlaneHeaders(key: string, providerUrl: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    'content-type': 'application/json',
    'x-gateway-api-key': key,
    'x-gateway-provider': 'openai',
    'x-gateway-custom-host': providerUrl,
    authorization: 'Bearer sk-provider',
    ...extra,
  }
}

/** POSTs `body` (default `CHAT_BODY`) to the gateway at `gatewayUrl` with `dataPlaneHeaders`. */
export function postChat(gatewayUrl: string, key: string, providerUrl: string, extra: Record<string, string> = {}, body: unknown = CHAT_BODY): Promise<Response> {
  return fetch(`${gatewayUrl}/v1/chat/completions`, { method: 'POST', headers: dataPlaneHeaders(key, providerUrl, extra), body: JSON.stringify(body) })
}
