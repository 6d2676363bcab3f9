/**
 * The one place where values become SQL text, for the analytics queries of both log stores.
 *
 * Neither store gets bound parameters from us: ClickHouse 18.16 has no server-side query
 * parameters, and one query text for both engines keeps the builder shared. So every value that
 * reaches SQL is either a whitelisted constant (identifiers, fragments written in this folder) or
 * goes through `quoteString` / `quoteNumber` here.
 *
 * - ClickHouse string literals treat the backslash as an escape character, so it is escaped as
 *   well as the quote; control characters (NUL included) are written as `\xHH`, so no raw byte of
 *   the value can end the literal or confuse the HTTP transport.
 * - DuckDB follows standard SQL: only the quote is doubled and a backslash is an ordinary
 *   character. A NUL cannot appear inside a DuckDB literal, so it is spliced in with `chr(0)`.
 * - Numbers must be finite; negative numbers are parenthesised so that `x - -1` can never turn
 *   into `x --1`, a comment.
 */

/** The SQL engines the analytics queries are written for. */
export type SqlEngine = 'clickhouse' | 'duckdb'

// The backslash, the quote, control characters and DEL: escaped rather than written raw.
const CLICKHOUSE_ESCAPED = /[\\'\u0000-\u001f\u007f]/g

function clickHouseEscape(char: string): string {
  if (char === '\\') return '\\\\'
  if (char === "'") return "\\'"
  return `\\x${char.charCodeAt(0).toString(16).padStart(2, '0')}`
}

/** Lone UTF-16 surrogates cannot be encoded as UTF-8; they become U+FFFD, as `TextEncoder` would. */
function wellFormed(value: string): string {
  return value.replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, '\ufffd')
}

/** A string literal for `engine` holding exactly `value`. */
export function quoteString(engine: SqlEngine, value: string): string {
  if (typeof value !== 'string') throw new TypeError('quoteString expects a string')
  const text = wellFormed(value)
  if (engine === 'clickhouse') return `'${text.replace(CLICKHOUSE_ESCAPED, clickHouseEscape)}'`
  const parts = text.split('\u0000').map((part) => `'${part.replaceAll("'", "''")}'`)
  return parts.length === 1 ? (parts[0] as string) : `(${parts.join(' || chr(0) || ')})`
}

/** A numeric literal; throws on anything but a finite number. */
export function quoteNumber(value: number): string {
  if (typeof value !== 'number' || !Number.isFinite(value)) throw new TypeError('quoteNumber expects a finite number')
  // String() of a finite number is digits, '.', 'e', '+', '-' only: both engines parse it.
  const text = String(value)
  return value < 0 ? `(${text})` : text
}

/** A non-negative integer literal (limits, offsets, epoch values); throws on anything else. */
export function quoteInteger(value: number): string {
  if (!Number.isSafeInteger(value) || value < 0) throw new TypeError('quoteInteger expects a non-negative safe integer')
  return String(value)
}

/** A database name written into SQL unquoted: `[A-Za-z_][A-Za-z0-9_]*`; throws otherwise. */
export function databaseName(name: string): string {
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new TypeError(`invalid database name: ${JSON.stringify(name)}`)
  return name
}
