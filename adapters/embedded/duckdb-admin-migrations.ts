/**
 * Brings the admin tables of the embedded file up to date on start: creates missing tables and adds
 * the columns a file written by an older version lacks (duckdb-schema.ts lists both).
 */
import type { DuckDbExecutor } from './duckdb-database.js'
import { ADMIN_COLUMN_MIGRATIONS, ADMIN_TABLES } from './duckdb-schema.js'

/**
 * Adds the columns of `ADMIN_COLUMN_MIGRATIONS` that a file written by an older version lacks.
 * DuckDB cannot add a column with a constraint, and refuses `SET NOT NULL` in a transaction that
 * already updated the table ("Cannot create index with outstanding updates"), so a column is added
 * bare, filled by rewriting it (`SET DATA TYPE ... USING`, which is no update), then made NOT NULL.
 */
async function migrateColumns(tx: DuckDbExecutor): Promise<void> {
  const existing = await tx.query(
    `SELECT table_name, column_name FROM information_schema.columns
     WHERE table_catalog = current_database() AND table_schema = current_schema()`,
  )
  const present = new Set(existing.map((row) => `${String(row.table_name)}.${String(row.column_name)}`))
  for (const migration of ADMIN_COLUMN_MIGRATIONS) {
    if (present.has(`${migration.table}.${migration.column}`)) continue
    const column = `${migration.table} ALTER COLUMN ${migration.column}`
    await tx.run(`ALTER TABLE ${migration.table} ADD COLUMN IF NOT EXISTS ${migration.column} ${migration.type}`)
    if (migration.fill !== null) await tx.run(`ALTER TABLE ${column} SET DATA TYPE ${migration.type} USING ${migration.fill}`)
    if (migration.notNull) await tx.run(`ALTER TABLE ${column} SET NOT NULL`)
  }
}

/** Creates missing admin tables and columns; run it in one transaction so a failed start changes nothing. */
export async function createAdminTables(tx: DuckDbExecutor): Promise<void> {
  for (const table of ADMIN_TABLES) await tx.run(table.ddl)
  await migrateColumns(tx)
}
