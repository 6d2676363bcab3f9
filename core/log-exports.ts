/**
 * Log exports (`/v1/logs/exports…`, reference/admin-api.md §14): jobs that write the logs matching
 * a filter as JSON Lines, and the port that keeps them. Also the bundle of log ports the Admin API
 * uses, which is empty when the `log` plugin is disabled (no log store is then ever opened).
 */
import type { Paged, PageRequest } from './admin-records.js'
import type { LogAnalytics } from './logs.js'
import type { ByteStream, LogSink } from './ports.js'
import { portToken, type Service } from './service.js'

/** `draft` until started; `in_progress` while it runs; then `success`, `failed` or `stopped` (cancelled). */
export const EXPORT_STATUSES = ['draft', 'in_progress', 'success', 'failed', 'stopped'] as const
export type ExportStatus = (typeof EXPORT_STATUSES)[number]

/** Fields an export may write per log (`requested_data`, reference §14). */
export const EXPORT_FIELDS = [
  'id', 'trace_id', 'created_at', 'request', 'response', 'is_success', 'ai_org', 'ai_model', 'req_units', 'res_units',
  'total_units', 'request_url', 'cost', 'cost_currency', 'response_time', 'response_status_code', 'mode', 'config',
  'prompt_slug', 'metadata',
] as const
export type ExportField = (typeof EXPORT_FIELDS)[number]

/** One export job. */
export interface ExportRecord {
  /** UUID. */
  readonly id: string
  readonly organisationId: string
  /** Workspace UUID the export reads from; `null`: the whole organisation (organisation keys only). */
  readonly workspaceId: string | null
  /**
   * The filters as the client sent them (validated; same names as the analytics query parameters),
   * re-parsed when the job starts so relative choices (the workspace) are checked again.
   */
  readonly filters: Readonly<Record<string, unknown>>
  readonly requestedData: readonly ExportField[]
  readonly description: string | null
  readonly status: ExportStatus
  /** Logs written by the last run (0 before it ran). */
  readonly total: number
  /** Why the last run failed (safe to show), or `null`. */
  readonly error: string | null
  /** API key id or JWT subject of the creator. */
  readonly createdBy: string
  /** ISO 8601. */
  readonly createdAt: string
  /** ISO 8601; also the optimistic-update version. */
  readonly lastUpdatedAt: string
  /**
   * Random key (base64url) that signs the export's download URLs. Never shown; a new one is made
   * when the export is started again, so earlier links stop working.
   */
  readonly signingKey: string
}

/** Narrows `ExportStore.list`. */
export interface ExportFilter {
  /** Only exports of this workspace (UUID). */
  readonly workspaceId?: string
}

/** Receives an export's JSON Lines; nothing is visible to readers until `commit`. */
export interface ExportFileWriter {
  /** Appends text (whole lines); resolves when it may be called again (backpressure). */
  write(text: string): Promise<void>
  /** Makes the file the export's data, replacing an earlier one atomically. */
  commit(): Promise<void>
  /** Drops what was written; the export's earlier data (if any) stays. */
  abort(): Promise<void>
}

/**
 * Where export jobs and their files live (embedded: `GATEWAY_DATA_DIR/exports/`). Every read is
 * scoped by organisation; workspace visibility is the caller's business.
 */
export interface ExportStore extends Service {
  insert(record: ExportRecord): Promise<void>
  /** `organisationId` `null`: any organisation (only for the signed download link, whose signature the caller then checks). */
  find(organisationId: string | null, id: string): Promise<ExportRecord | null>
  /** Newest first. */
  list(organisationId: string, filter: ExportFilter, page: PageRequest): Promise<Paged<ExportRecord>>
  /** Replaces the record only while the stored one still has `expectedLastUpdatedAt`; returns whether it did. */
  update(record: ExportRecord, expectedLastUpdatedAt: string): Promise<boolean>
  /** A writer for the export's data file. */
  openWriter(id: string): Promise<ExportFileWriter>
  /** The export's data file as a byte stream, or `null` when it has none. */
  openReader(id: string): Promise<ByteStream | null>
}
export const ExportStore = portToken<ExportStore>('ExportStore')

/**
 * The log ports the Admin API's analytics, feedback, logs and exports endpoints use. The token
 * resolves to `null` when the `log` plugin is disabled: those endpoints then answer 503
 * `GW_LOGS_DISABLED`, and no log store is opened.
 */
export interface LogServices {
  readonly analytics: LogAnalytics
  readonly sink: LogSink
  readonly exports: ExportStore
}
export const LogServices = portToken<LogServices | null>('LogServices')
