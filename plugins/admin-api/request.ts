/**
 * What every Admin API handler shares: the ports it uses, the caller, validation of bodies and
 * queries (`field: message`, AB01), paging, and `commit`, which stores a change together with its
 * audit entry in one transaction.
 */
import type { PageRequest, UsageLimitRule } from '../../core/admin-records.js'
import { auditEntryOf } from '../../core/audit.js'
import type { BudgetAccounts, BudgetEntity, BudgetUsage } from '../../core/budgets.js'
import type { Principal, RequestContext } from '../../core/context.js'
import { ERRORS, gatewayError, type GatewayError } from '../../core/errors.js'
import { JSON_TOO_DEEP_MESSAGE, jsonTooDeep } from '../../core/json-depth.js'
import type { LogServices } from '../../core/log-exports.js'
import type { Reply } from '../../core/plugin.js'
import type { AdminStore, AdminWriter, ChangeNotifier, ProviderRegistry, SecretCipher } from '../../core/ports.js'
import type { AdminRouteId } from '../../core/routes.js'
import type { Clock, Logger } from '../../core/service.js'
import type { AdminApiConfig } from './config.js'
import { describeIssue } from './schemas.js'
import type { z } from 'zod'

/** The ports and settings handlers use. */
export interface AdminDeps {
  readonly store: AdminStore
  readonly notifier: ChangeNotifier
  readonly clock: Clock
  readonly registry: ProviderRegistry
  /** Seals virtual keys' provider credentials (never stored or returned in clear). */
  readonly cipher: SecretCipher
  /** Budget usage shown with `usage_limits`, and `reset_usage` (untracked when the budget plugin is off). */
  readonly budgets: BudgetAccounts
  readonly config: AdminApiConfig
  /** Analytics, feedback, custom logs and exports (`null` while the `log` plugin is disabled). */
  readonly logs: LogServices | null
  /** For work that outlives its request (export jobs). */
  readonly logger: Logger
}

/** An authenticated Admin API request (public routes get a `PublicRequest`, which has no principal). */
export interface AdminRequest {
  readonly ctx: RequestContext
  readonly principal: Principal
  readonly deps: AdminDeps
}

export type Handler = (request: AdminRequest) => Promise<Reply | GatewayError>

/** A request on a public route (no principal: the invite link, the OpenAPI document). */
export interface PublicRequest {
  readonly ctx: RequestContext
  readonly deps: AdminDeps
}

export type PublicHandler = (request: PublicRequest) => Promise<Reply | GatewayError>

/** Handlers keyed by Admin API route id (core/routes.ts): a misspelt or removed route id does not compile. */
export type HandlerMap = Partial<Readonly<Record<AdminRouteId, Handler>>>
/** Handlers of the public Admin API routes (no credential), keyed the same way. */
export type PublicHandlerMap = Partial<Readonly<Record<AdminRouteId, PublicHandler>>>

/** A result or the error to reply with. */
export type Outcome<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: GatewayError }

export function notFound(what: string): GatewayError {
  return gatewayError(ERRORS.GW_ADMIN_NOT_FOUND, `${what} not found`)
}

export function invalid(message: string, param?: string): GatewayError {
  return gatewayError(ERRORS.GW_ADMIN_VALIDATION, message, param === undefined ? undefined : { param })
}

export function forbidden(message?: string): GatewayError {
  return gatewayError(ERRORS.GW_ADMIN_FORBIDDEN, message)
}

/**
 * For optimistic updates inside `commit`: a lost race must roll the transaction back (dropping
 * the audit entry with it), so it rejects; the plugin replies 409 and the audit plugin records it.
 */
export function requireApplied(applied: boolean): void {
  if (!applied) throw gatewayError(ERRORS.GW_ADMIN_STALE)
}

/** Validates the JSON body (an empty optional body is `{}`). */
export function parseBody<S extends z.ZodType>(ctx: RequestContext, schema: S): Outcome<z.output<S>> {
  const parsed = schema.safeParse(ctx.body ?? {})
  return parsed.success ? { ok: true, value: parsed.data } : { ok: false, error: invalid(describeIssue(parsed.error)) }
}

/**
 * Validates a body that is one `item` or an array of them (`many`), on routes with a `raw` body
 * (core parses only objects); malformed or too deeply nested JSON answers like core's own checks
 * (a `RangeError` from `JSON.stringify` would otherwise turn a deep body into a 500). Each shape is
 * validated with its own schema, so the message names the field at fault (a union would only say
 * "Invalid input"); array items are named by index: `1.trace_id: ...`.
 */
export function parseOneOrMany<O extends z.ZodType, M extends z.ZodType>(ctx: RequestContext, item: O, many: M): Outcome<z.output<O> | z.output<M>> {
  const raw = ctx.rawBody
  if (raw === null || raw.length === 0) return { ok: false, error: gatewayError(ERRORS.GW_REQ_MALFORMED_JSON, 'The request body is empty: send a JSON object or array') }
  let value: unknown
  try {
    value = JSON.parse(raw.toString('utf8'))
  } catch {
    return { ok: false, error: gatewayError(ERRORS.GW_REQ_MALFORMED_JSON) }
  }
  if (jsonTooDeep(raw, value)) return { ok: false, error: gatewayError(ERRORS.GW_REQ_INVALID, JSON_TOO_DEEP_MESSAGE) }
  const parsed = (Array.isArray(value) ? many : item).safeParse(value)
  return parsed.success ? { ok: true, value: parsed.data } : { ok: false, error: invalid(describeIssue(parsed.error)) }
}

/**
 * Validates the query string. A repeated parameter keeps its last value; unknown parameters are
 * ignored (clients and SDKs add their own).
 */
export function parseQuery<S extends z.ZodType>(ctx: RequestContext, schema: S): Outcome<z.output<S>> {
  const values = ctx.query.length === 0 ? {} : Object.fromEntries(new URLSearchParams(ctx.query))
  const parsed = schema.safeParse(values)
  return parsed.success ? { ok: true, value: parsed.data } : { ok: false, error: invalid(describeIssue(parsed.error)) }
}

/** `current_page`/`page_size` (or the camelCase pair) → offset paging. */
export function pageOf(page: number, size: number): PageRequest {
  return { offset: page * size, limit: size }
}

/**
 * The budget state of an entity's usage limits for its view, or `undefined` when budgets are not
 * tracked (the budget plugin is off) or cannot be read right now: the view then shows the limits
 * without usage rather than failing the read.
 */
export async function budgetUsage(
  deps: AdminDeps,
  entity: BudgetEntity,
  workspaceId: string,
  rules: readonly UsageLimitRule[],
): Promise<readonly BudgetUsage[] | undefined> {
  if (rules.length === 0) return []
  try {
    return (await deps.budgets.usage(entity, workspaceId, rules)) ?? undefined
  } catch {
    return undefined
  }
}

/** ISO 8601 for the injected clock; strictly after `previous` so optimistic updates always see a change. */
export function nowIso(deps: AdminDeps, previous?: string): string {
  let now = deps.clock.now()
  if (previous !== undefined) now = Math.max(now, Date.parse(previous) + 1)
  return new Date(now).toISOString()
}

/**
 * Tells the audit plugin which workspace and resource a request touched, in case the request is
 * refused or fails after this point (it then stores the entry itself).
 */
export function noteAction(ctx: RequestContext, facts: { workspaceId?: string | null; resourceId?: string | null; userId?: string | null; organisationId?: string | null }): void {
  const note = (ctx.adminAction ??= { audited: false, workspaceId: null, resourceId: null, userId: null, organisationId: null })
  if (facts.workspaceId !== undefined) note.workspaceId = facts.workspaceId
  if (facts.resourceId !== undefined) note.resourceId = facts.resourceId
  if (facts.userId !== undefined) note.userId = facts.userId
  if (facts.organisationId !== undefined) note.organisationId = facts.organisationId
}

/**
 * Runs `work` in one admin store transaction together with the request's audit entry (status
 * `status`). A rejection (conflict, lost race) propagates and nothing is stored; the audit plugin
 * then records the refusal.
 */
export async function commit<T>(request: { ctx: RequestContext; deps: AdminDeps }, status: number, work: (writer: AdminWriter) => Promise<T>): Promise<T> {
  const { ctx, deps } = request
  noteAction(ctx, {})
  const note = ctx.adminAction
  const entry = auditEntryOf(ctx, {
    status,
    workspaceId: note?.workspaceId ?? null,
    resourceId: note?.resourceId ?? null,
    userId: note?.userId ?? null,
    organisationId: note?.organisationId ?? null,
  })
  const result = await deps.store.write(entry, work)
  if (note !== null) note.audited = true
  return result
}
