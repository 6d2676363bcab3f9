/**
 * Admin API calls as a given key, and users made the way real ones are (invited, then accepting the
 * link): for tests of who may do what.
 */
import { TEST_ADMIN_KEY } from './gateway.js'

export type Json = Record<string, any>

/** An answer with its raw text (for failure messages) and its parsed JSON (`{}` when empty). */
export interface Answer {
  readonly status: number
  readonly body: Json
  readonly text: string
}

/** `method path` on the gateway at `baseUrl`, authenticated with `key`, with an optional JSON body. */
export async function callAs(baseUrl: string, key: string, method: string, path: string, body?: unknown): Promise<Answer> {
  const headers: Record<string, string> = { 'x-gateway-api-key': key }
  if (body !== undefined) headers['content-type'] = 'application/json'
  const response = await fetch(`${baseUrl}${path}`, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) })
  const text = await response.text()
  return { status: response.status, text, body: text.length > 0 ? (JSON.parse(text) as Json) : {} }
}

export interface InvitedUser {
  readonly id: string
  /** Its first workspace's user key, when the invite asked for keys (`scopes`). */
  readonly key: string | null
}

/**
 * Invites a user (with the test Admin API key) with an organisation role and a role in one
 * workspace, accepts the link, and returns the user's id and, with `scopes`, its workspace user key.
 * Throws when the invite or the acceptance fails.
 */
export async function inviteUser(
  baseUrl: string,
  role: 'admin' | 'member',
  workspace: { readonly id: string; readonly role: 'admin' | 'manager' | 'member' },
  scopes?: readonly string[],
): Promise<InvitedUser> {
  const invite = await callAs(baseUrl, TEST_ADMIN_KEY, 'POST', '/v1/admin/users/invites', {
    email: `${role}-${workspace.role}-${Math.random().toString(36).slice(2)}@example.test`,
    role,
    workspaces: [workspace],
    ...(scopes === undefined ? {} : { workspace_api_key_details: { scopes } }),
  })
  if (invite.status !== 200) throw new Error(`invite refused: ${invite.text}`)
  const token = String(invite.body.invite_link).split('/').pop()
  const accepted = await fetch(`${baseUrl}/v1/invites/${token}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ first_name: 'Test', last_name: role, password: 'long enough password' }),
  })
  const body = (await accepted.json()) as Json
  if (accepted.status !== 201) throw new Error(`accepting the invite failed: ${JSON.stringify(body)}`)
  return { id: body.user.id, key: body.api_keys[0]?.key ?? null }
}
