/**
 * First-start seed and start-time JWT settings of the auth plugin.
 *
 * - `seedFirstStart`: on an empty store, creates the organisation, its owner (admin of the default
 *   workspace), the default workspace and an Admin API key, all in one transaction.
 * - `applyBootstrapJwt`: writes `GATEWAY_JWKS_URL` / `GATEWAY_JWKS`, with `GATEWAY_JWT_ISSUER` /
 *   `GATEWAY_JWT_AUDIENCE`, to the first organisation's JWT settings when they differ from what is
 *   stored, audited like `PUT /v1/admin/organisation/jwt`, and tells every instance to drop its
 *   cached copy.
 */
import { randomBytes, randomUUID } from 'node:crypto'
import type { AuditEntry, JwtSettings, OrganisationRecord } from '../../core/admin-records.js'
import { CHANGE_CHANNELS } from '../../core/channels.js'
import type { AdminStore, ChangeNotifier } from '../../core/ports.js'
import { ADMIN_KEY_SCOPES } from '../../core/scopes.js'
import { issueApiKey, newApiKeySecret } from '../../core/secrets.js'
import type { Logger } from '../../core/service.js'
import type { AuthConfig } from './config.js'

type BootstrapSettings = AuthConfig['bootstrap']

/**
 * Seeds an empty store. Returns the generated Admin API key secret when one was generated (the
 * caller prints it once), `null` when the store already held an organisation or the key was given.
 */
export async function seedFirstStart(store: AdminStore, settings: BootstrapSettings, nowMs: number, logger: Logger): Promise<string | null> {
  if ((await store.findFirstOrganisation()) !== null) return null
  const generated = settings.adminKey.length === 0
  const secret = generated ? newApiKeySecret() : settings.adminKey
  const now = new Date(nowMs).toISOString()
  const organisationId = randomUUID()
  const ownerId = randomUUID()
  const workspaceId = randomUUID()
  await store.bootstrap({
    organisation: { id: organisationId, name: settings.organisationName, createdAt: now, jwt: null },
    owner: {
      id: ownerId,
      organisationId,
      email: settings.ownerEmail.toLowerCase(),
      firstName: 'Owner',
      lastName: '',
      role: 'owner',
      passwordHash: null,
      createdAt: now,
      lastUpdatedAt: now,
    },
    workspace: {
      id: workspaceId,
      slug: `ws-default-${randomBytes(3).toString('hex')}`,
      organisationId,
      name: settings.workspaceName,
      description: 'Created on first start',
      defaults: null,
      usageLimits: [],
      rateLimits: [],
      createdAt: now,
      lastUpdatedAt: now,
    },
    membership: { workspaceId, userId: ownerId, organisationId, role: 'admin', createdAt: now, lastUpdatedAt: now },
    adminKey: issueApiKey(
      {
        name: 'Bootstrap Admin API key',
        description: 'Created on first start',
        type: 'organisation-service',
        organisationId,
        workspaceId: null,
        userId: ownerId,
        scopes: ADMIN_KEY_SCOPES,
        expiresAt: null,
        creationMode: 'auto',
        createdAt: now,
      },
      secret,
    ).record,
  })
  logger.info(
    { organisationId },
    generated ? 'bootstrapped a new organisation with a generated Admin API key' : 'bootstrapped a new organisation with GATEWAY_BOOTSTRAP_ADMIN_KEY',
  )
  return generated ? secret : null
}

/**
 * Applies the configured JWKS (URL or static), issuer and audience to the first organisation, as one
 * set of settings (an issuer or audience not configured is not required). Returns whether it wrote.
 * No JWKS configured leaves the stored settings alone: settings made through the Admin API survive
 * restarts.
 */
export async function applyBootstrapJwt(
  store: AdminStore,
  notifier: ChangeNotifier,
  settings: BootstrapSettings,
  nowMs: number,
  logger: Logger,
): Promise<boolean> {
  const { jwksUrl, jwks, jwtIssuer: issuer, jwtAudience: audience } = settings
  if (jwksUrl === null && jwks === null) return false
  const organisation = await store.findFirstOrganisation()
  if (organisation === null) return false
  const wanted = { jwksUrl, jwks, issuer, audience }
  if (sameJwtSettings(organisation, wanted)) return false
  const now = new Date(nowMs).toISOString()
  const audit: AuditEntry = {
    id: randomUUID(),
    timestamp: now,
    organisationId: organisation.id,
    workspaceId: null,
    userId: null,
    userType: 'api_key',
    apiKeyId: null,
    method: 'PUT',
    uri: '/v1/admin/organisation/jwt',
    requestId: randomUUID(),
    // The body a PUT with these settings would send. A static JWKS holds only public keys, but its
    // size makes it noise in the audit log.
    requestBody: JSON.stringify({
      ...(jwksUrl !== null ? { jwks_url: jwksUrl } : { jwks: '(from GATEWAY_JWKS)' }),
      ...(issuer !== null ? { issuer } : {}),
      ...(audience !== null ? { audience } : {}),
    }),
    queryParams: '{}',
    responseStatusCode: 200,
    resourceType: 'organisation',
    action: 'update',
    resourceId: organisation.id,
    clientIp: null,
  }
  const updated: OrganisationRecord = { ...organisation, jwt: { ...wanted, updatedAt: now } }
  await store.write(audit, (writer) => writer.updateOrganisation(updated))
  notifier.publish(CHANGE_CHANNELS.organisations, organisation.id)
  logger.info(
    { organisationId: organisation.id },
    jwksUrl !== null ? 'set the JWKS URL of the organisation from GATEWAY_JWKS_URL' : 'set the static JWKS of the organisation from GATEWAY_JWKS',
  )
  return true
}

function sameJwtSettings(organisation: OrganisationRecord, wanted: Omit<JwtSettings, 'updatedAt'>): boolean {
  const stored = organisation.jwt
  if (stored === null) return false
  return (
    stored.jwksUrl === wanted.jwksUrl &&
    canonicalJson(stored.jwks) === canonicalJson(wanted.jwks) &&
    stored.issuer === wanted.issuer &&
    canonicalJson(stored.audience) === canonicalJson(wanted.audience)
  )
}

/** JSON with object keys sorted, so a store that reorders keys does not cause a write at every start. */
function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, item: unknown) =>
    item !== null && typeof item === 'object' && !Array.isArray(item)
      ? Object.fromEntries(Object.entries(item as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : item,
  )
}

/** What the first start prints once: the generated key and a first request. */
export function bootstrapBanner(secret: string, url: string): string {
  return [
    '',
    '================================================================================',
    ' First start: created an organisation, a default workspace and an Admin API key.',
    ' This key is shown ONCE. Store it now:',
    '',
    `   ${secret}`,
    '',
    ' Make a workspace and a data-plane key with it:',
    `   curl -s -X POST ${url}/v1/admin/workspaces -H 'x-gateway-api-key: ${secret}' \\`,
    `     -H 'content-type: application/json' -d '{"name":"my-workspace"}'`,
    `   curl -s -X POST ${url}/v1/api-keys/workspace/service -H 'x-gateway-api-key: ${secret}' \\`,
    `     -H 'content-type: application/json' \\`,
    `     -d '{"name":"my-app","workspace_id":"<id from above>","scopes":["completions.write"]}'`,
    ' Then call a provider through the gateway with that key:',
    `   curl -s ${url}/v1/chat/completions -H 'x-gateway-api-key: <workspace key>' \\`,
    `     -H 'x-gateway-provider: openai' -H "authorization: Bearer $OPENAI_API_KEY" \\`,
    `     -H 'content-type: application/json' -d '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Hello"}]}'`,
    '================================================================================',
    '',
  ].join('\n')
}
