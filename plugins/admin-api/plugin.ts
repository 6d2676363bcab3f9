/**
 * admin-api: the terminal plugin of the admin route group (API.md §5).
 * Phases: onForward (priority 110). Reads `ctx.principal`, `ctx.route`, `ctx.params`, `ctx.query`,
 * `ctx.body`; writes `ctx.adminAction` (what the audit plugin needs).
 * I/O: the admin store (every change is stored with its audit entry in one transaction); publishes
 * change notifications so caches on every instance drop changed keys, workspaces, settings,
 * configs and prompt templates.
 * Analytics, feedback, custom logs and exports use the log ports (`LogServices`: analytics reads,
 * the log sink, the export store); with the `log` plugin disabled they are absent and those
 * routes answer 503 `GW_LOGS_DISABLED`. Export jobs run in the background on this instance and
 * are stopped by `close()`.
 * Failure policy: validation → 400 AB01 naming the field; unknown or other-workspace resources →
 * 404 AB08 (never revealed); role rules → 403 AB03; uniqueness, dependants and lost races → 409
 * AB07; admin store errors → 500 AB04 (logged by core); log store errors on the log routes → 503
 * `GW_LOGS_UNAVAILABLE` (logged here at warn).
 */
import type { RequestContext } from '../../core/context.js'
import { ERRORS, gatewayError, isGatewayError, type GatewayError } from '../../core/errors.js'
import type { GatewayPlugin, Reply } from '../../core/plugin.js'
import { LogStoreUnavailableError } from '../../core/ports.js'
import { ADMIN_ROUTES } from '../../core/routes.js'
import { analyticsHandlers } from './analytics.js'
import { apiKeyHandlers } from './api-keys.js'
import { auditLogHandlers } from './audit-logs.js'
import { collectionHandlers } from './collections.js'
import { configHandlers } from './configs.js'
import { feedbackHandlers } from './feedback.js'
import { inviteHandlers, publicInviteHandlers } from './invites.js'
import { labelHandlers } from './labels.js'
import { ExportJobs, exportHandlers, publicExportHandlers } from './log-exports.js'
import { logHandlers } from './logs.js'
import { publicOpenApiHandlers } from './openapi.js'
import { organisationHandlers } from './organisation.js'
import { partialHandlers } from './partials.js'
import { promptHandlers } from './prompts.js'
import type { AdminDeps, Handler, PublicHandler } from './request.js'
import { userHandlers } from './users.js'
import { virtualKeyHandlers } from './virtual-keys.js'
import { workspaceHandlers } from './workspaces.js'

export class AdminApiPlugin implements GatewayPlugin {
  readonly #deps: AdminDeps
  readonly #handlers: ReadonlyMap<string, Handler>
  readonly #publicHandlers: ReadonlyMap<string, PublicHandler>
  readonly #exports: ExportJobs

  constructor(deps: AdminDeps) {
    this.#deps = deps
    this.#exports = new ExportJobs(deps)
    this.#handlers = new Map(
      Object.entries({
        ...organisationHandlers,
        ...workspaceHandlers,
        ...userHandlers,
        ...inviteHandlers,
        ...apiKeyHandlers,
        ...virtualKeyHandlers,
        ...configHandlers,
        ...promptHandlers,
        ...partialHandlers,
        ...labelHandlers,
        ...collectionHandlers,
        ...auditLogHandlers,
        ...analyticsHandlers,
        ...feedbackHandlers,
        ...logHandlers,
        ...exportHandlers(this.#exports),
      }),
    )
    this.#publicHandlers = new Map(Object.entries({ ...publicInviteHandlers, ...publicOpenApiHandlers, ...publicExportHandlers }))
    // A route added to the table without its handler fails the boot, not the first request to it.
    for (const route of ADMIN_ROUTES) {
      if (!(route.public ? this.#publicHandlers : this.#handlers).has(route.id)) throw new Error(`admin-api: no handler for the route ${route.id}`)
    }
  }

  /** Stops running log exports (they are recorded as interrupted). */
  async close(): Promise<void> {
    await this.#exports.close()
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
      // The log store failing is an outage to report, not a bug: 503 (the sink keeps journaling).
      if (error instanceof LogStoreUnavailableError) {
        this.#deps.logger.warn({ err: error, route: ctx.route.id, requestId: ctx.requestId }, 'log store unreachable')
        return gatewayError(ERRORS.GW_LOGS_UNAVAILABLE)
      }
      throw error
    }
  }
}
