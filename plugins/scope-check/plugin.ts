/**
 * scope-check: may this key call this route?
 * Phases: onRequest (priority 900, after auth; before the body is read, since scopes depend only on
 * the route). Reads `ctx.principal`, `ctx.route`, `ctx.params`; writes nothing.
 * Rules: public routes (invite links, the OpenAPI document) pass; Admin API keys are refused on the data plane; admin-only routes refuse workspace keys; a
 * key needs any one of the route's scopes (`list` does not imply `read`).
 * Failure policy: fails closed (no principal → 401). No I/O.
 */
import type { RequestContext } from '../../core/context.js'
import { ERRORS, gatewayError, type GatewayError } from '../../core/errors.js'
import type { GatewayPlugin } from '../../core/plugin.js'
import { selectsProvider } from '../../core/routes.js'

const ADMIN_KEY_ON_DATA_PLANE = gatewayError(ERRORS.GW_SCOPE_ADMIN_KEY_ON_DATA_PLANE)
const ADMIN_KEY_REQUIRED = gatewayError(ERRORS.GW_SCOPE_ADMIN_KEY_REQUIRED)

export class ScopeCheckPlugin implements GatewayPlugin {
  onRequest(ctx: RequestContext): GatewayError | undefined {
    const route = ctx.route
    if (route.public) return undefined
    const principal = ctx.principal
    if (principal === null) return gatewayError(ERRORS.GW_AUTH_KEY_MISSING)
    // A /v1 path with no provider selection and no admin route: forward answers 400
    // "missing provider selection" (API.md §2), whoever calls.
    if (route.group === 'passthrough' && !selectsProvider(ctx.headers)) return undefined
    const isAdminKey = principal.keyType === 'organisation-service'
    if (route.group !== 'admin' && isAdminKey) return ADMIN_KEY_ON_DATA_PLANE
    if (route.adminKeyOnly && !isAdminKey) return ADMIN_KEY_REQUIRED
    const admitting = route.scopes
    for (const scope of admitting) if (principal.scopes.has(scope)) return undefined
    return gatewayError(
      ERRORS.GW_SCOPE_MISSING,
      admitting.length === 0
        ? 'You do not have enough permissions to execute this request'
        : `You do not have enough permissions to execute this request: needs one of ${admitting.join(', ')}`,
    )
  }
}
