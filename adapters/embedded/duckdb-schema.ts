/**
 * The embedded database's tables, in one place. To add a table, append an entry to `ADMIN_TABLES`
 * (with its unique keys, so a violation is reported as a `GW_ADMIN_CONFLICT` naming the field). To
 * add a column to an existing table, put it in the table's `ddl` and also in `ADMIN_COLUMN_MIGRATIONS`,
 * so a file created by an older version gains it on start.
 *
 * Conventions:
 * - ids, enums and free text are `VARCHAR`; string arrays are `VARCHAR[]` (order kept).
 * - structured settings (limits, defaults, JWT settings, invite workspaces) are JSON text in a
 *   `VARCHAR` column; the record types in core/admin-records.ts are their schema.
 * - admin timestamps are `TIMESTAMP` holding UTC; the API reads and writes ISO 8601 strings.
 * - no foreign keys: DuckDB cannot update a referenced row in place, and the MongoDB store has
 *   none either; the Admin API checks references and the store cascades deletes itself.
 * - no `CREATE INDEX`: an explicit index makes DuckDB refuse `ALTER COLUMN ... SET DATA TYPE` on its
 *   table ("entries that depend on it"), which the column migrations use; the admin tables are
 *   small and the indexes of the PRIMARY KEY / UNIQUE constraints cover the hot lookups.
 * - `request_logs` has no index at all: ART indexes slow down the batch inserts (`read_json`), and
 *   DuckDB's zone maps already prune scans by `created_at`.
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
      created_at TIMESTAMP NOT NULL,
      jwt_settings VARCHAR
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
      password_hash VARCHAR,
      last_updated_at TIMESTAMP NOT NULL,
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
      defaults VARCHAR,
      usage_limits VARCHAR NOT NULL,
      rate_limits VARCHAR NOT NULL,
      UNIQUE (organisation_id, slug)
    )`,
    uniqueKeys: [
      { columns: ['id'], field: 'id', message: 'A workspace with this id already exists' },
      { columns: ['organisation_id', 'slug'], field: 'slug', message: 'A workspace with this slug already exists in the organisation' },
    ],
  },
  {
    name: 'workspace_members',
    entity: 'workspace member',
    ddl: `CREATE TABLE IF NOT EXISTS workspace_members (
      workspace_id VARCHAR NOT NULL,
      user_id VARCHAR NOT NULL,
      organisation_id VARCHAR NOT NULL,
      role VARCHAR NOT NULL,
      created_at TIMESTAMP NOT NULL,
      last_updated_at TIMESTAMP NOT NULL,
      PRIMARY KEY (workspace_id, user_id)
    )`,
    uniqueKeys: [{ columns: ['workspace_id', 'user_id'], field: 'userId', message: 'The user is already a member of this workspace' }],
  },
  {
    name: 'invites',
    entity: 'invite',
    ddl: `CREATE TABLE IF NOT EXISTS invites (
      id VARCHAR PRIMARY KEY,
      organisation_id VARCHAR NOT NULL,
      token_hash VARCHAR NOT NULL UNIQUE,
      email VARCHAR NOT NULL,
      role VARCHAR NOT NULL,
      workspaces VARCHAR NOT NULL,
      api_key_scopes VARCHAR[],
      invited_by VARCHAR,
      state VARCHAR NOT NULL,
      created_at TIMESTAMP NOT NULL,
      expires_at TIMESTAMP NOT NULL,
      accepted_at TIMESTAMP,
      last_updated_at TIMESTAMP NOT NULL
    )`,
    uniqueKeys: [
      { columns: ['id'], field: 'id', message: 'An invite with this id already exists' },
      { columns: ['token_hash'], field: 'tokenHash', message: 'An invite with this token hash already exists' },
    ],
  },
  {
    name: 'api_keys',
    entity: 'API key',
    // `previous_key_hash` has no index of its own (see the module comment): lookups by hash scan
    // this small table, and the rotated-out hash is only looked at on a cache miss.
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
      last_updated_at TIMESTAMP NOT NULL,
      rate_limits VARCHAR NOT NULL,
      usage_limits VARCHAR,
      defaults VARCHAR,
      alert_emails VARCHAR[] NOT NULL,
      previous_key_hash VARCHAR,
      previous_key_expires_at TIMESTAMP,
      last_rotated_at TIMESTAMP
    )`,
    uniqueKeys: [
      { columns: ['id'], field: 'id', message: 'An API key with this id already exists' },
      { columns: ['key_hash'], field: 'keyHash', message: 'An API key with this key hash already exists' },
    ],
  },
  {
    name: 'virtual_keys',
    entity: 'virtual key',
    // Provider secrets only in sealed form: `sealed_keys` in round-robin order, `sealed_model_config`
    // the sealed JSON of the provider settings.
    ddl: `CREATE TABLE IF NOT EXISTS virtual_keys (
      id VARCHAR PRIMARY KEY,
      slug VARCHAR NOT NULL,
      organisation_id VARCHAR NOT NULL,
      workspace_id VARCHAR NOT NULL,
      name VARCHAR NOT NULL,
      note VARCHAR,
      provider VARCHAR NOT NULL,
      sealed_keys VARCHAR[] NOT NULL,
      masked_key VARCHAR,
      custom_host VARCHAR,
      sealed_model_config VARCHAR,
      rate_limits VARCHAR NOT NULL,
      usage_limits VARCHAR,
      status VARCHAR NOT NULL,
      expires_at TIMESTAMP,
      created_at TIMESTAMP NOT NULL,
      last_updated_at TIMESTAMP NOT NULL,
      UNIQUE (organisation_id, slug)
    )`,
    uniqueKeys: [
      { columns: ['id'], field: 'id', message: 'A virtual key with this id already exists' },
      { columns: ['organisation_id', 'slug'], field: 'slug', message: 'A virtual key with this slug already exists in the organisation' },
    ],
  },
  {
    name: 'collections',
    entity: 'collection',
    // `default_workspace_id` is the workspace id on its default collection and NULL on every other
    // one, so the unique key allows one default per workspace (SQL UNIQUE ignores NULLs) and
    // findDefaultCollection looks it up through that key's index.
    ddl: `CREATE TABLE IF NOT EXISTS collections (
      id VARCHAR PRIMARY KEY,
      slug VARCHAR NOT NULL,
      organisation_id VARCHAR NOT NULL,
      workspace_id VARCHAR NOT NULL,
      name VARCHAR NOT NULL,
      parent_collection_id VARCHAR,
      is_default BOOLEAN NOT NULL,
      default_workspace_id VARCHAR UNIQUE,
      status VARCHAR NOT NULL,
      created_at TIMESTAMP NOT NULL,
      last_updated_at TIMESTAMP NOT NULL,
      UNIQUE (organisation_id, slug)
    )`,
    uniqueKeys: [
      { columns: ['id'], field: 'id', message: 'A collection with this id already exists' },
      { columns: ['organisation_id', 'slug'], field: 'slug', message: 'A collection with this slug already exists in the organisation' },
      { columns: ['default_workspace_id'], field: 'isDefault', message: 'The workspace already has a default collection' },
    ],
  },
  {
    name: 'prompts',
    entity: 'prompt',
    ddl: `CREATE TABLE IF NOT EXISTS prompts (
      id VARCHAR PRIMARY KEY,
      slug VARCHAR NOT NULL,
      organisation_id VARCHAR NOT NULL,
      workspace_id VARCHAR NOT NULL,
      collection_id VARCHAR NOT NULL,
      name VARCHAR NOT NULL,
      status VARCHAR NOT NULL,
      published_version INTEGER NOT NULL,
      latest_version INTEGER NOT NULL,
      created_at TIMESTAMP NOT NULL,
      last_updated_at TIMESTAMP NOT NULL,
      UNIQUE (organisation_id, slug)
    )`,
    uniqueKeys: [
      { columns: ['id'], field: 'id', message: 'A prompt with this id already exists' },
      { columns: ['organisation_id', 'slug'], field: 'slug', message: 'A prompt with this slug already exists in the organisation' },
    ],
  },
  {
    name: 'prompt_versions',
    entity: 'prompt version',
    // The prompt data plane reads a version on a cache miss by (prompt_id, version) or (prompt_id,
    // label_id). DuckDB scans an index only for a filter on a single column (a two-column key is
    // checked on writes but read by a full scan), so each pair also lives in one key column:
    // `version_key` (JSON text `["<prompt_id>",<version>]`) and `label_key` (`["<prompt_id>","<label_id>"]`,
    // NULL while unlabelled, which the key ignores). Their unique keys make version numbers unique
    // per prompt and let a label mark at most one version of a prompt.
    // JSON text: parameters (object), functions and tools (arrays or NULL), tool_choice (any JSON
    // value, NULL for none), template_metadata (object or NULL).
    ddl: `CREATE TABLE IF NOT EXISTS prompt_versions (
      id VARCHAR PRIMARY KEY,
      prompt_id VARCHAR NOT NULL,
      organisation_id VARCHAR NOT NULL,
      workspace_id VARCHAR NOT NULL,
      version INTEGER NOT NULL,
      version_key VARCHAR NOT NULL UNIQUE,
      template VARCHAR NOT NULL,
      parameters VARCHAR NOT NULL,
      model VARCHAR,
      virtual_key VARCHAR,
      functions VARCHAR,
      tools VARCHAR,
      tool_choice VARCHAR,
      description VARCHAR,
      template_metadata VARCHAR,
      is_raw_template BOOLEAN NOT NULL,
      label_id VARCHAR,
      label_key VARCHAR UNIQUE,
      status VARCHAR NOT NULL,
      created_at TIMESTAMP NOT NULL
    )`,
    uniqueKeys: [
      { columns: ['id'], field: 'id', message: 'A prompt version with this id already exists' },
      { columns: ['version_key'], field: 'version', message: 'The prompt already has a version with this number' },
      { columns: ['label_key'], field: 'labelId', message: 'Another version of the prompt already carries this label' },
    ],
  },
  {
    name: 'labels',
    entity: 'label',
    // `scope` is the workspace id of a custom label and '' for a built-in (universal) one, whose
    // workspace_id is NULL: one unique key then makes names unique per workspace and built-in names
    // unique per organisation, so concurrent ensureBuiltInLabels calls cannot create duplicates.
    ddl: `CREATE TABLE IF NOT EXISTS labels (
      id VARCHAR PRIMARY KEY,
      organisation_id VARCHAR NOT NULL,
      workspace_id VARCHAR,
      scope VARCHAR NOT NULL,
      name VARCHAR NOT NULL,
      description VARCHAR,
      color_code VARCHAR,
      is_universal BOOLEAN NOT NULL,
      status VARCHAR NOT NULL,
      created_at TIMESTAMP NOT NULL,
      last_updated_at TIMESTAMP NOT NULL,
      UNIQUE (organisation_id, scope, name)
    )`,
    uniqueKeys: [
      { columns: ['id'], field: 'id', message: 'A label with this id already exists' },
      { columns: ['organisation_id', 'scope', 'name'], field: 'name', message: 'A label with this name already exists' },
    ],
  },
  {
    name: 'partials',
    entity: 'partial',
    ddl: `CREATE TABLE IF NOT EXISTS partials (
      id VARCHAR PRIMARY KEY,
      slug VARCHAR NOT NULL,
      organisation_id VARCHAR NOT NULL,
      workspace_id VARCHAR NOT NULL,
      collection_id VARCHAR,
      name VARCHAR NOT NULL,
      status VARCHAR NOT NULL,
      published_version INTEGER NOT NULL,
      latest_version INTEGER NOT NULL,
      created_at TIMESTAMP NOT NULL,
      last_updated_at TIMESTAMP NOT NULL,
      UNIQUE (organisation_id, slug),
      UNIQUE (workspace_id, name)
    )`,
    uniqueKeys: [
      { columns: ['id'], field: 'id', message: 'A partial with this id already exists' },
      { columns: ['organisation_id', 'slug'], field: 'slug', message: 'A partial with this slug already exists in the organisation' },
      { columns: ['workspace_id', 'name'], field: 'name', message: 'A partial with this name already exists in the workspace' },
    ],
  },
  {
    name: 'partial_versions',
    entity: 'partial version',
    // `version_key` (`["<partial_id>",<version>]`) as in prompt_versions: rendering reads partial
    // versions on a cache miss too.
    ddl: `CREATE TABLE IF NOT EXISTS partial_versions (
      id VARCHAR PRIMARY KEY,
      partial_id VARCHAR NOT NULL,
      organisation_id VARCHAR NOT NULL,
      workspace_id VARCHAR NOT NULL,
      version INTEGER NOT NULL,
      version_key VARCHAR NOT NULL UNIQUE,
      template VARCHAR NOT NULL,
      description VARCHAR,
      status VARCHAR NOT NULL,
      created_at TIMESTAMP NOT NULL
    )`,
    uniqueKeys: [
      { columns: ['id'], field: 'id', message: 'A partial version with this id already exists' },
      { columns: ['version_key'], field: 'version', message: 'The partial already has a version with this number' },
    ],
  },
  {
    name: 'configs',
    entity: 'config',
    // The data plane looks a config up by slug or id on a cache miss. DuckDB reads an index only for
    // a filter on a single column, so the (organisation, slug) pair lives in one key column,
    // `slug_key` (JSON text `["<organisation_id>","<slug>"]`), whose unique key also makes slugs
    // unique per organisation. `default_workspace_id` is the workspace id on its default config and
    // NULL on every other one, as in `collections`. The row carries its latest version's JSON
    // (`config`, `version`, `version_id`), so a look-up reads one row.
    ddl: `CREATE TABLE IF NOT EXISTS configs (
      id VARCHAR PRIMARY KEY,
      slug VARCHAR NOT NULL,
      slug_key VARCHAR NOT NULL UNIQUE,
      organisation_id VARCHAR NOT NULL,
      workspace_id VARCHAR NOT NULL,
      name VARCHAR NOT NULL,
      config VARCHAR NOT NULL,
      version INTEGER NOT NULL,
      version_id VARCHAR NOT NULL,
      is_default BOOLEAN NOT NULL,
      default_workspace_id VARCHAR UNIQUE,
      status VARCHAR NOT NULL,
      owner_id VARCHAR,
      updated_by VARCHAR,
      created_at TIMESTAMP NOT NULL,
      last_updated_at TIMESTAMP NOT NULL
    )`,
    uniqueKeys: [
      { columns: ['id'], field: 'id', message: 'A config with this id already exists' },
      { columns: ['slug_key'], field: 'slug', message: 'A config with this slug already exists in the organisation' },
      { columns: ['default_workspace_id'], field: 'isDefault', message: 'The workspace already has a default config' },
    ],
  },
  {
    name: 'config_versions',
    entity: 'config version',
    // `version_key` (`["<config_id>",<version>]`) as in prompt_versions: version numbers unique per config.
    ddl: `CREATE TABLE IF NOT EXISTS config_versions (
      id VARCHAR PRIMARY KEY,
      config_id VARCHAR NOT NULL,
      organisation_id VARCHAR NOT NULL,
      workspace_id VARCHAR NOT NULL,
      version INTEGER NOT NULL,
      version_key VARCHAR NOT NULL UNIQUE,
      config VARCHAR NOT NULL,
      created_by VARCHAR,
      created_at TIMESTAMP NOT NULL
    )`,
    uniqueKeys: [
      { columns: ['id'], field: 'id', message: 'A config version with this id already exists' },
      { columns: ['version_key'], field: 'version', message: 'The config already has a version with this number' },
    ],
  },
  {
    name: 'audit_log',
    entity: 'audit entry',
    ddl: `CREATE TABLE IF NOT EXISTS audit_log (
      id VARCHAR PRIMARY KEY,
      timestamp TIMESTAMP NOT NULL,
      organisation_id VARCHAR,
      workspace_id VARCHAR,
      user_id VARCHAR,
      user_type VARCHAR NOT NULL,
      method VARCHAR NOT NULL,
      uri VARCHAR NOT NULL,
      request_id VARCHAR NOT NULL,
      request_body VARCHAR,
      query_params VARCHAR NOT NULL,
      response_status_code INTEGER NOT NULL,
      resource_type VARCHAR NOT NULL,
      action VARCHAR NOT NULL,
      resource_id VARCHAR,
      client_ip VARCHAR,
      api_key_id VARCHAR
    )`,
    uniqueKeys: [{ columns: ['id'], field: 'id', message: 'An audit entry with this id already exists' }],
  },
] as const satisfies readonly TableSpec[]

export type AdminTableName = (typeof ADMIN_TABLES)[number]['name']

/** A column added to an existing table after its first release. */
export interface ColumnMigration {
  readonly table: AdminTableName
  readonly column: string
  /** The column type exactly as in the table's `ddl`. */
  readonly type: string
  /** SQL expression over the row's other columns that fills existing rows; `null` leaves them `NULL`. */
  readonly fill: string | null
  /** Whether the column is `NOT NULL` in the `ddl` (set after the fill). */
  readonly notNull: boolean
}

/**
 * Columns the first release's tables lacked, in the order they are added. Existing rows get the
 * value a fresh write of the same record would most plausibly have had: never-edited users were
 * last updated when created, and empty lists are empty JSON arrays.
 */
export const ADMIN_COLUMN_MIGRATIONS: readonly ColumnMigration[] = [
  { table: 'organisations', column: 'jwt_settings', type: 'VARCHAR', fill: null, notNull: false },
  { table: 'users', column: 'password_hash', type: 'VARCHAR', fill: null, notNull: false },
  { table: 'users', column: 'last_updated_at', type: 'TIMESTAMP', fill: 'created_at', notNull: true },
  { table: 'workspaces', column: 'defaults', type: 'VARCHAR', fill: null, notNull: false },
  { table: 'workspaces', column: 'usage_limits', type: 'VARCHAR', fill: `'[]'`, notNull: true },
  { table: 'workspaces', column: 'rate_limits', type: 'VARCHAR', fill: `'[]'`, notNull: true },
  { table: 'api_keys', column: 'rate_limits', type: 'VARCHAR', fill: `'[]'`, notNull: true },
  { table: 'api_keys', column: 'usage_limits', type: 'VARCHAR', fill: null, notNull: false },
  { table: 'api_keys', column: 'defaults', type: 'VARCHAR', fill: null, notNull: false },
  { table: 'api_keys', column: 'alert_emails', type: 'VARCHAR[]', fill: '[]::VARCHAR[]', notNull: true },
  { table: 'api_keys', column: 'previous_key_hash', type: 'VARCHAR', fill: null, notNull: false },
  { table: 'api_keys', column: 'previous_key_expires_at', type: 'TIMESTAMP', fill: null, notNull: false },
  { table: 'api_keys', column: 'last_rotated_at', type: 'TIMESTAMP', fill: null, notNull: false },
  // Older entries named a service key only as their actor; a user key's entries cannot be traced back.
  { table: 'audit_log', column: 'api_key_id', type: 'VARCHAR', fill: `CASE WHEN user_type = 'api_key' THEN user_id END`, notNull: false },
]

/**
 * `request_logs`: one row per `LogRecord` (core/logs.ts), same column names as the ClickHouse table
 * (adapters/clickhouse/clickhouse-schema.ts). `created_at` is a UTC `TIMESTAMP` with millisecond
 * values; token columns are all `NULL` when the provider reported no usage; cost is exact nano-USD;
 * metadata is two parallel lists (`metadata_keys[i]` has `metadata_values[i]`), as in ClickHouse,
 * so one filter expression shape serves both stores. `attempts` is JSON text. A column added later
 * is appended here; duckdb-log-migration.ts adds it to an existing table on start.
 */
export const REQUEST_LOG_COLUMNS = [
  ['id', 'VARCHAR NOT NULL'],
  ['trace_id', 'VARCHAR NOT NULL'],
  ['source', 'VARCHAR NOT NULL'],
  ['created_at', 'TIMESTAMP NOT NULL'],
  ['organisation_id', 'VARCHAR'],
  ['workspace_id', 'VARCHAR'],
  ['api_key_id', 'VARCHAR'],
  ['end_user', 'VARCHAR'],
  ['virtual_key', 'VARCHAR'],
  ['config', 'VARCHAR'],
  ['prompt_slug', 'VARCHAR'],
  ['prompt_version', 'INTEGER'],
  ['method', 'VARCHAR NOT NULL'],
  ['route', 'VARCHAR NOT NULL'],
  ['path', 'VARCHAR NOT NULL'],
  ['provider', 'VARCHAR'],
  ['model', 'VARCHAR'],
  ['status', 'INTEGER NOT NULL'],
  ['outcome', 'VARCHAR NOT NULL'],
  ['streaming', 'BOOLEAN NOT NULL'],
  ['latency_ms', 'DOUBLE NOT NULL'],
  ['ttft_ms', 'DOUBLE'],
  ['prompt_tokens', 'INTEGER'],
  ['completion_tokens', 'INTEGER'],
  ['total_tokens', 'INTEGER'],
  ['cached_tokens', 'INTEGER'],
  ['cost_nano_usd', 'BIGINT'],
  ['cache_status', 'VARCHAR NOT NULL'],
  ['retry_count', 'INTEGER NOT NULL'],
  ['fallback_index', 'INTEGER'],
  ['error_code', 'VARCHAR'],
  ['error_type', 'VARCHAR'],
  ['metadata_keys', 'VARCHAR[] NOT NULL'],
  ['metadata_values', 'VARCHAR[] NOT NULL'],
  ['request_body', 'VARCHAR'],
  ['response_body', 'VARCHAR'],
  ['config_version', 'INTEGER'],
  ['attempts', 'VARCHAR'],
] as const

export const REQUEST_LOG_TABLE = 'request_logs'

export const REQUEST_LOG_DDL = `CREATE TABLE IF NOT EXISTS ${REQUEST_LOG_TABLE} (
  ${REQUEST_LOG_COLUMNS.map(([name, type]) => `${name} ${type}`).join(',\n  ')}
)`

/**
 * `feedback`: one row per version of a feedback entry; the row with the greatest `updated_at` of an
 * id is the current one (readers pick it with `arg_max`/`QUALIFY`, as ClickHouse's
 * ReplacingMergeTree does on merge).
 */
export const FEEDBACK_COLUMNS = [
  ['id', 'VARCHAR NOT NULL'],
  ['trace_id', 'VARCHAR NOT NULL'],
  ['organisation_id', 'VARCHAR NOT NULL'],
  ['workspace_id', 'VARCHAR'],
  ['value', 'INTEGER NOT NULL'],
  ['weight', 'DOUBLE NOT NULL'],
  ['metadata_keys', 'VARCHAR[] NOT NULL'],
  ['metadata_values', 'VARCHAR[] NOT NULL'],
  ['created_at', 'TIMESTAMP NOT NULL'],
  ['updated_at', 'TIMESTAMP NOT NULL'],
] as const

export const FEEDBACK_TABLE = 'feedback'

export const FEEDBACK_DDL = `CREATE TABLE IF NOT EXISTS ${FEEDBACK_TABLE} (
  ${FEEDBACK_COLUMNS.map(([name, type]) => `${name} ${type}`).join(',\n  ')}
)`
