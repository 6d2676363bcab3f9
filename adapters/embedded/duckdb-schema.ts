/**
 * The embedded database's tables, in one place. To add a table, append an entry to `ADMIN_TABLES`
 * (with its unique keys, so a violation is reported as a `GW_ADMIN_CONFLICT` naming the field).
 *
 * Conventions:
 * - ids, enums and free text are `VARCHAR`; string arrays are `VARCHAR[]` (order kept).
 * - admin timestamps are `TIMESTAMP` holding UTC; the API reads and writes ISO 8601 strings.
 * - no foreign keys: DuckDB cannot update a referenced row in place, and the MongoDB store has
 *   none either; the Admin API checks references.
 * - `request_logs` has no index at all: ART indexes slow the appender down, and DuckDB's zone
 *   maps already prune scans by `created_at`.
 */

/** One unique constraint, and how to report its violation. */
export interface UniqueKey {
  /** Columns in constraint order, as DuckDB reports them. */
  readonly columns: readonly string[]
  /** The record field named in the error's `param` (camelCase, as in core/ports.ts). */
  readonly field: string
  /** Client-facing message, naming the field. */
  readonly message: string
}

export interface TableSpec {
  readonly name: string
  /** What one row is called in messages (`workspace`); used when DuckDB does not name the columns. */
  readonly entity: string
  readonly ddl: string
  /** Primary key first, then the other unique constraints declared in `ddl`. */
  readonly uniqueKeys: readonly UniqueKey[]
}

export const ADMIN_TABLES = [
  {
    name: 'organisations',
    entity: 'organisation',
    ddl: `CREATE TABLE IF NOT EXISTS organisations (
      id VARCHAR PRIMARY KEY,
      name VARCHAR NOT NULL,
      created_at TIMESTAMP NOT NULL
    )`,
    uniqueKeys: [{ columns: ['id'], field: 'id', message: 'An organisation with this id already exists' }],
  },
  {
    name: 'users',
    entity: 'user',
    ddl: `CREATE TABLE IF NOT EXISTS users (
      id VARCHAR PRIMARY KEY,
      organisation_id VARCHAR NOT NULL,
      email VARCHAR NOT NULL,
      first_name VARCHAR NOT NULL,
      last_name VARCHAR NOT NULL,
      role VARCHAR NOT NULL,
      created_at TIMESTAMP NOT NULL,
      UNIQUE (organisation_id, email)
    )`,
    uniqueKeys: [
      { columns: ['id'], field: 'id', message: 'A user with this id already exists' },
      { columns: ['organisation_id', 'email'], field: 'email', message: 'A user with this email already exists in the organisation' },
    ],
  },
  {
    name: 'workspaces',
    entity: 'workspace',
    ddl: `CREATE TABLE IF NOT EXISTS workspaces (
      id VARCHAR PRIMARY KEY,
      slug VARCHAR NOT NULL,
      organisation_id VARCHAR NOT NULL,
      name VARCHAR NOT NULL,
      description VARCHAR,
      created_at TIMESTAMP NOT NULL,
      last_updated_at TIMESTAMP NOT NULL,
      UNIQUE (organisation_id, slug)
    )`,
    uniqueKeys: [
      { columns: ['id'], field: 'id', message: 'A workspace with this id already exists' },
      { columns: ['organisation_id', 'slug'], field: 'slug', message: 'A workspace with this slug already exists in the organisation' },
    ],
  },
  {
    name: 'api_keys',
    entity: 'API key',
    ddl: `CREATE TABLE IF NOT EXISTS api_keys (
      id VARCHAR PRIMARY KEY,
      key_hash VARCHAR NOT NULL UNIQUE,
      masked_key VARCHAR NOT NULL,
      name VARCHAR NOT NULL,
      description VARCHAR,
      type VARCHAR NOT NULL,
      organisation_id VARCHAR NOT NULL,
      workspace_id VARCHAR,
      user_id VARCHAR,
      scopes VARCHAR[] NOT NULL,
      status VARCHAR NOT NULL,
      expires_at TIMESTAMP,
      creation_mode VARCHAR NOT NULL,
      created_at TIMESTAMP NOT NULL,
      last_updated_at TIMESTAMP NOT NULL
    )`,
    uniqueKeys: [
      { columns: ['id'], field: 'id', message: 'An API key with this id already exists' },
      { columns: ['key_hash'], field: 'keyHash', message: 'An API key with this key hash already exists' },
    ],
  },
] as const satisfies readonly TableSpec[]

export type AdminTableName = (typeof ADMIN_TABLES)[number]['name']

/**
 * `request_logs`: one row per `LogRecord`, columns in appender order. `created_at` is a UTC
 * `TIMESTAMP` (millisecond values) so analytics can use `date_trunc`/`time_bucket` directly;
 * `usage` is split into four token columns (all `NULL` when the provider reported none);
 * `metadata` is JSON text.
 */
export const REQUEST_LOG_COLUMNS = [
  ['id', 'VARCHAR NOT NULL'],
  ['trace_id', 'VARCHAR NOT NULL'],
  ['created_at', 'TIMESTAMP NOT NULL'],
  ['organisation_id', 'VARCHAR'],
  ['workspace_id', 'VARCHAR'],
  ['api_key_id', 'VARCHAR'],
  ['method', 'VARCHAR NOT NULL'],
  ['route', 'VARCHAR NOT NULL'],
  ['path', 'VARCHAR NOT NULL'],
  ['provider', 'VARCHAR'],
  ['model', 'VARCHAR'],
  ['status', 'INTEGER NOT NULL'],
  ['outcome', 'VARCHAR NOT NULL'],
  ['streaming', 'BOOLEAN NOT NULL'],
  ['latency_ms', 'DOUBLE NOT NULL'],
  ['ttfb_ms', 'DOUBLE'],
  ['prompt_tokens', 'INTEGER'],
  ['completion_tokens', 'INTEGER'],
  ['total_tokens', 'INTEGER'],
  ['cached_tokens', 'INTEGER'],
  ['error_code', 'VARCHAR'],
  ['metadata', 'VARCHAR'],
] as const

export const REQUEST_LOG_TABLE = 'request_logs'

export const REQUEST_LOG_DDL = `CREATE TABLE IF NOT EXISTS ${REQUEST_LOG_TABLE} (
  ${REQUEST_LOG_COLUMNS.map(([name, type]) => `${name} ${type}`).join(',\n  ')}
)`
