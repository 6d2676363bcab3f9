/**
 * admin-api: the terminal plugin of the admin route group (API.md §5).
 * Phases: onForward (priority 110). Reads `ctx.principal`, `ctx.route`, `ctx.params`, `ctx.query`,
 * `ctx.body`; writes `ctx.adminAction` (what the audit plugin needs).
 * I/O: the admin store (every change is stored with its audit entry in one transaction); publishes
 * change notifications so caches on every instance drop changed keys, workspaces and settings.
 * Failure policy: validation → 400 AB01 naming the field; unknown or other-workspace resources →
 * 404 AB08 (never revealed); role rules → 403 AB03; uniqueness, dependants and lost races → 409
 * AB07; store errors → 500 AB04 (logged by core).
 */
import type { RequestContext } from '../../core/context.js'
import { ERRORS, gatewayError, isGatewayError, type GatewayError } from '../../core/errors.js'
import type { GatewayPlugin, Reply } from '../../core/plugin.js'
import { apiKeyHandlers } from './api-keys.js'
import { auditLogHandlers } from './audit-logs.js'
import { inviteHandlers, publicInviteHandlers } from './invites.js'
import { publicOpenApiHandlers } from './openapi.js'
import { organisationHandlers } from './organisation.js'
import type { AdminDeps, Handler, PublicHandler } from './request.js'
import { userHandlers } from './users.js'
import { virtualKeyHandlers } from './virtual-keys.js'
import { workspaceHandlers } from './workspaces.js'

export class AdminApiPlugin implements GatewayPlugin {
  readonly #deps: AdminDeps
  readonly #handlers: ReadonlyMap<string, Handler>
  readonly #publicHandlers: ReadonlyMap<string, PublicHandler>

  constructor(deps: AdminDeps) {
    this.#deps = deps
    this.#handlers = new Map(
      Object.entries({ ...organisationHandlers, ...workspaceHandlers, ...userHandlers, ...inviteHandlers, ...apiKeyHandlers, ...virtualKeyHandlers, ...auditLogHandlers }),
    )
    this.#publicHandlers = new Map(Object.entries({ ...publicInviteHandlers, ...publicOpenApiHandlers }))
  }

  async onForward(ctx: RequestContext): Promise<Reply | GatewayError> {
    try {
      if (ctx.route.public) {
        const handler = this.#publicHandlers.get(ctx.route.id)
        return handler === undefined ? gatewayError(ERRORS.GW_REQ_ROUTE_NOT_FOUND) : await handler({ ctx, deps: this.#deps })
      }
      const handler = this.#handlers.get(ctx.route.id)
      const principal = ctx.principal
      if (handler === undefined || principal === null) return gatewayError(ERRORS.GW_REQ_ROUTE_NOT_FOUND)
      return await handler({ ctx, principal, deps: this.#deps })
    } catch (error) {
      // Conflicts and lost races raised inside a transaction are answers, not bugs.
      if (isGatewayError(error)) return error
      throw error
    }
  }
}
