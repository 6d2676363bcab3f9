/**
 * `GET /v1/admin/organisation` and the organisation's JWT settings
 * (`GET/PUT/DELETE /v1/admin/organisation/jwt`, API.md §1).
 *
 * PUT replaces the settings: exactly one of `jwks_url` and `jwks`, plus optional `issuer` (a token's
 * `iss` must equal it) and `audience` (a string or a list; a token's `aud` must contain one of
 * them). Every change is published on the `organisations` channel, so every instance drops its
 * cached settings and the tokens it verified under them.
 */
import type { JsonWebKeySet, OrganisationRecord } from '../../core/admin-records.js'
import { CHANGE_CHANNELS } from '../../core/channels.js'
import { jsonReply } from '../../core/plugin.js'
import { commit, invalid, notFound, nowIso, parseBody, type AdminRequest, type HandlerMap } from './request.js'
import { jwtSettingsBody } from './schemas.js'
import { jwtSettingsView, organisationView } from './views.js'

/** JWK members that only private keys have: a JWKS holding them would publish a signing key. */
const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'k'] as const

/** Why a JWKS cannot verify RS256 tokens, or `null` when it can. */
export function jwksProblem(jwks: JsonWebKeySet): string | null {
  for (const [index, key] of jwks.keys.entries()) {
    if (PRIVATE_MEMBERS.some((member) => member in key)) return `jwks.keys.${index}: must be a public key (private key members found)`
    if (key.kty !== 'RSA') return `jwks.keys.${index}.kty: must be "RSA" (tokens are RS256)`
    if (typeof key.n !== 'string' || typeof key.e !== 'string') return `jwks.keys.${index}: an RSA key needs "n" and "e"`
    if (typeof key.kid !== 'string' || key.kid.length === 0) return `jwks.keys.${index}.kid: required (tokens name their key with kid)`
    if (key.alg !== undefined && key.alg !== 'RS256') return `jwks.keys.${index}.alg: must be "RS256"`
  }
  return null
}

/** The accepted audiences, one string or a list, kept as a list without repeats. */
function audienceList(audience: string | readonly string[] | null): string[] | null {
  if (audience === null) return null
  return typeof audience === 'string' ? [audience] : [...new Set(audience)]
}

async function organisationOf(request: AdminRequest): Promise<OrganisationRecord | null> {
  return request.deps.store.findOrganisation(request.principal.organisationId)
}

export const organisationHandlers: HandlerMap = {
  'admin.organisation.get': async (request) => {
    const organisation = await organisationOf(request)
    return organisation === null ? notFound('Organisation') : jsonReply(200, organisationView(organisation))
  },

  'admin.organisation.jwt.get': async (request) => {
    const organisation = await organisationOf(request)
    return organisation === null ? notFound('Organisation') : jsonReply(200, jwtSettingsView(organisation))
  },

  'admin.organisation.jwt.update': async (request) => {
    const body = parseBody(request.ctx, jwtSettingsBody)
    if (!body.ok) return body.error
    const { deps } = request
    const organisation = await organisationOf(request)
    if (organisation === null) return notFound('Organisation')
    let jwksUrl: string | null = null
    let jwks: JsonWebKeySet | null = null
    if (body.value.jwks_url !== undefined) {
      // The gateway fetches this URL: the same SSRF rules as x-gateway-custom-host apply, here and
      // again when each connection opens (the auth plugin fetches through the guarded OutboundFetch).
      const check = await deps.registry.checkCustomHost(body.value.jwks_url)
      if (!check.ok) return invalid(`jwks_url: ${check.reason}`, 'jwks_url')
      jwksUrl = body.value.jwks_url
    } else if (body.value.jwks !== undefined) {
      jwks = body.value.jwks
      const problem = jwksProblem(jwks)
      if (problem !== null) return invalid(problem, 'jwks')
    }
    const issuer = body.value.issuer ?? null
    const audience = audienceList(body.value.audience ?? null)
    const updated: OrganisationRecord = { ...organisation, jwt: { jwksUrl, jwks, issuer, audience, updatedAt: nowIso(deps) } }
    await commit(request, 200, (writer) => writer.updateOrganisation(updated))
    deps.notifier.publish(CHANGE_CHANNELS.organisations, organisation.id)
    return jsonReply(200, jwtSettingsView(updated))
  },

  'admin.organisation.jwt.delete': async (request) => {
    const { deps } = request
    const organisation = await organisationOf(request)
    if (organisation === null) return notFound('Organisation')
    await commit(request, 200, (writer) => writer.updateOrganisation({ ...organisation, jwt: null }))
    deps.notifier.publish(CHANGE_CHANNELS.organisations, organisation.id)
    return jsonReply(200, {})
  },
}
