/**
 * audit: the audit entry of every state-changing Admin API request that admin-api did not store
 * together with its change: refusals by auth (401), scope-check (403), validation (400), unknown
 * resources (404), conflicts and lost races (409), failures (500) and client aborts.
 * Phases: onLog (priority 5: the admin group's last plugin). Reads `ctx.route.audit`,
 * `ctx.adminAction`, `ctx.status`, `ctx.error`, what `auditEntryOf` reads (principal, path, query,
 * body, client address) and, for a request refused before it had a principal, `ctx.gatewayCredential`
 * (only the claims of a JWT, see below; the credential is never stored); writes nothing to the
 * context.
 * I/O: `AdminStore.recordAudit`, started from onLog and never awaited by the request;
 * `AdminStore.findFirstOrganisation` once (cached), for requests that name no organisation;
 * `AdminStore.findOrganisation` for the organisation a refused JWT claims (known ones cached).
 * Unauthenticated requests carry no verified organisation. A refused JWT (forged, expired, unknown
 * `kid`, ...) is filed under the organisation it claims (`gateway_oid` / `organisation_id`, claims.ts)
 * when that organisation exists, with `user_type` `user` and the token's subject (`email_id`, `sub`
 * or `uid`) as `user_id`: the unverified claims decide only where the entry is filed, nothing else.
 * Other unauthenticated requests (missing or bad API key, a JWT naming no existing organisation)
 * are filed under the deployment's first organisation: right for single-organisation deployments
 * (what bootstrap creates); a multi-organisation deployment finds them in its oldest organisation.
 * Failure policy: never changes a reply, never throws. A write the store refuses because it cannot
 * be reached joins a bounded in-memory queue, retried in order with exponential backoff and once
 * more at shutdown. An entry that still cannot be stored, that the store rejects as invalid, or
 * that does not fit in the queue is logged at error level with its content: never lost silently.
 */
import type { AuditEntry } from '../../core/admin-records.js'
import { auditEntryOf } from '../../core/audit.js'
import type { RequestContext } from '../../core/context.js'
import { ERRORS, isGatewayError } from '../../core/errors.js'
import type { GatewayPlugin } from '../../core/plugin.js'
import type { AdminStore } from '../../core/ports.js'
import type { Logger } from '../../core/service.js'
import { claimedIdentity } from './claims.js'
import type { AuditConfig } from './config.js'

/** Recorded for a client that went away before any reply was sent (nginx's "client closed request"). */
const CLIENT_CLOSED_REQUEST = 499

/** The status the client got; for an abort before the reply, the error it would have got. */
function statusOf(ctx: RequestContext): number {
  if (ctx.status !== 0) return ctx.status
  return ctx.error?.status ?? CLIENT_CLOSED_REQUEST
}

/**
 * A retried write whose first attempt did commit meets its own id: the entry is stored. Ids are
 * random UUIDs, so nothing else conflicts on `id`.
 */
function alreadyStored(error: unknown): boolean {
  return isGatewayError(error) && error.code === ERRORS.GW_ADMIN_CONFLICT.code && error.param === 'id'
}

/** Stores reject unreachable-store failures with plain errors; a `GatewayError` means the entry itself was refused. */
function isTransient(error: unknown): boolean {
  return !isGatewayError(error)
}

/** Organisations remembered as existing (a bound, not a tuning knob: organisations are few). */
const MAX_KNOWN_ORGANISATIONS = 1_000

/** An entry to store; `claimedOrganisationId` is where a refused JWT asks it to be filed (checked when stored). */
interface Pending {
  readonly entry: AuditEntry
  readonly claimedOrganisationId: string | null
}

export class AuditPlugin implements GatewayPlugin {
  readonly #config: AuditConfig
  readonly #store: AdminStore
  readonly #logger: Logger
  /** Entries waiting for the store, oldest first. */
  readonly #queue: Pending[] = []
  /** Writes and retries under way, so `close()` can wait for them. */
  readonly #running = new Set<Promise<void>>()
  #timer: NodeJS.Timeout | null = null
  #retryDelayMs: number
  #retrying = false
  #closing = false
  #closed = false
  #firstOrganisationId: string | null = null
  /** Organisations a refused JWT claimed that exist (never the unknown ones: any text may be claimed). */
  readonly #knownOrganisations = new Set<string>()

  constructor(config: AuditConfig, store: AdminStore, logger: Logger) {
    this.#config = config
    this.#store = store
    this.#logger = logger
    this.#retryDelayMs = config.retryInitialMs
  }

  /** Entries waiting for a retry. */
  get queued(): number {
    return this.#queue.length
  }

  onLog(ctx: RequestContext): void {
    if (ctx.route.audit === null || ctx.adminAction?.audited === true) return
    let pending: Pending
    try {
      const note = ctx.adminAction
      // A JWT refused by auth: its unverified claims say where to file the entry and whom it names.
      const claimed = ctx.principal === null ? claimedIdentity(ctx.gatewayCredential) : null
      const entry = auditEntryOf(ctx, {
        status: statusOf(ctx),
        workspaceId: note?.workspaceId ?? null,
        resourceId: note?.resourceId ?? null,
        userId: note?.userId ?? claimed?.subject ?? null,
        organisationId: note?.organisationId ?? null,
      })
      pending = { entry: claimed === null ? entry : { ...entry, userType: 'user' }, claimedOrganisationId: claimed?.organisationId ?? null }
    } catch (error) {
      // Serialising an odd body must not escape onLog; what is known of the request is logged instead.
      this.#logger.error({ err: error, requestId: ctx.requestId, route: ctx.route.id, method: ctx.method, path: ctx.path, status: ctx.status }, 'audit entry could not be built')
      return
    }
    this.#track(this.#write(pending))
  }

  /** Waits for writes under way, then tries every queued entry once more. */
  async close(): Promise<void> {
    this.#closing = true
    if (this.#timer !== null) clearTimeout(this.#timer)
    this.#timer = null
    while (this.#running.size > 0) await Promise.all(this.#running)
    const remaining = this.#queue.splice(0)
    let reachable = true
    for (const pending of remaining) {
      // Once the store is unreachable, more attempts only delay shutdown: log the rest.
      if (!reachable) {
        this.#lost(pending.entry, null)
        continue
      }
      try {
        await this.#attempt(pending)
      } catch (error) {
        reachable = !isTransient(error)
        this.#lost(pending.entry, error)
      }
    }
    this.#closed = true
  }

  async #write(pending: Pending): Promise<void> {
    try {
      await this.#attempt(pending)
    } catch (error) {
      if (isTransient(error)) this.#enqueue(pending, error)
      else this.#lost(pending.entry, error)
    }
  }

  async #attempt(pending: Pending): Promise<void> {
    const { entry } = pending
    const filed = entry.organisationId === null ? { ...entry, organisationId: await this.#organisationToFile(pending.claimedOrganisationId) } : entry
    try {
      await this.#store.recordAudit(filed)
    } catch (error) {
      if (!alreadyStored(error)) throw error
    }
  }

  /** The organisation a refused JWT claims when it exists, else the deployment's first one. */
  async #organisationToFile(claimed: string | null): Promise<string | null> {
    if (claimed !== null) {
      if (this.#knownOrganisations.has(claimed)) return claimed
      if ((await this.#store.findOrganisation(claimed)) !== null) {
        if (this.#knownOrganisations.size >= MAX_KNOWN_ORGANISATIONS) this.#knownOrganisations.clear()
        this.#knownOrganisations.add(claimed)
        return claimed
      }
    }
    return this.#fallbackOrganisation()
  }

  async #fallbackOrganisation(): Promise<string | null> {
    this.#firstOrganisationId ??= (await this.#store.findFirstOrganisation())?.id ?? null
    return this.#firstOrganisationId
  }

  #enqueue(pending: Pending, error: unknown): void {
    if (this.#closed || this.#queue.length >= this.#config.maxQueue) {
      this.#lost(pending.entry, error)
      return
    }
    if (this.#queue.length === 0) this.#logger.warn({ err: error }, 'the admin store refused an audit entry: retrying in the background')
    this.#queue.push(pending)
    this.#schedule()
  }

  #schedule(): void {
    if (this.#timer !== null || this.#retrying || this.#closing) return
    this.#timer = setTimeout(() => {
      this.#timer = null
      this.#track(this.#retry())
    }, this.#retryDelayMs)
    // A pending retry must not keep the process alive; close() makes the last attempt.
    this.#timer.unref()
  }

  /** Writes queued entries in order until the queue is empty or the store fails again. */
  async #retry(): Promise<void> {
    this.#retrying = true
    let failed = false
    try {
      while (this.#queue.length > 0 && !this.#closing) {
        const pending = this.#queue[0] as Pending
        try {
          await this.#attempt(pending)
        } catch (error) {
          if (isTransient(error)) {
            failed = true
            break
          }
          this.#lost(pending.entry, error)
        }
        this.#queue.shift()
      }
    } finally {
      this.#retrying = false
    }
    if (failed) {
      this.#retryDelayMs = Math.min(this.#retryDelayMs * 2, this.#config.retryMaxMs)
      this.#schedule()
    } else if (!this.#closing) {
      this.#retryDelayMs = this.#config.retryInitialMs
      this.#logger.info({}, 'queued audit entries stored')
    }
  }

  #lost(entry: AuditEntry, error: unknown): void {
    this.#logger.error({ err: error ?? undefined, auditEntry: entry }, 'audit entry could not be stored')
  }

  #track(work: Promise<void>): void {
    this.#running.add(work)
    const done = (): void => {
      this.#running.delete(work)
    }
    work.then(done, done)
  }
}
