import { DuckDBInstance } from '@duckdb/node-api'
import { describe, expect, it } from 'vitest'
import { databaseName, quoteInteger, quoteNumber, quoteString } from '../../../adapters/sql/sql-literals.js'

const NASTY = [
  "plain",
  "it's",
  "'; DROP TABLE request_logs; --",
  "\\' OR 1=1 --",
  '\\',
  "\\\\'",
  'a\u0000b',
  '\n\r\t\u001b\u007f',
  '/* comment */ -- line',
  '😀 \u2028 \u202e é',
  "''''",
  '$1 {param:String} ?',
]

describe('quoteString: ClickHouse', () => {
  it('escapes the backslash and the quote, and writes control characters as \\x escapes', () => {
    expect(quoteString('clickhouse', "it's")).toBe("'it\\'s'")
    expect(quoteString('clickhouse', 'a\\b')).toBe("'a\\\\b'")
    expect(quoteString('clickhouse', "\\'")).toBe("'\\\\\\''")
    expect(quoteString('clickhouse', 'a\u0000b\n')).toBe("'a\\x00b\\x0a'")
    expect(quoteString('clickhouse', '-- x /* y */')).toBe("'-- x /* y */'")
  })

  it('leaves no unescaped quote: every quote inside is preceded by an odd run of backslashes', () => {
    for (const value of NASTY) {
      const inner = quoteString('clickhouse', value).slice(1, -1)
      expect(/[\u0000-\u001f]/.test(inner)).toBe(false)
      for (let i = 0; i < inner.length; i++) {
        if (inner[i] !== "'") continue
        let run = 0
        for (let j = i - 1; j >= 0 && inner[j] === '\\'; j--) run++
        expect(run % 2).toBe(1)
      }
    }
  })
})

describe('quoteString: DuckDB', () => {
  it('doubles quotes, keeps backslashes, and splices NUL in with chr(0)', () => {
    expect(quoteString('duckdb', "it's")).toBe("'it''s'")
    expect(quoteString('duckdb', 'a\\b')).toBe("'a\\b'")
    expect(quoteString('duckdb', 'a\u0000b')).toBe("('a' || chr(0) || 'b')")
  })

  it('round-trips every nasty value through a real DuckDB', async () => {
    const instance = await DuckDBInstance.create(':memory:')
    const connection = await instance.connect()
    try {
      for (const value of NASTY) {
        const reader = await connection.runAndReadAll(`SELECT ${quoteString('duckdb', value)} AS v`)
        expect(reader.getRowObjectsJS()[0]?.v).toBe(value)
      }
      const lone = await connection.runAndReadAll(`SELECT ${quoteString('duckdb', 'a\ud800b')} AS v`)
      expect(lone.getRowObjectsJS()[0]?.v).toBe('a\ufffdb')
    } finally {
      connection.disconnectSync()
      instance.closeSync()
    }
  })
})

describe('numbers and identifiers', () => {
  it('writes finite numbers, parenthesising negatives so `- -1` cannot become a comment', () => {
    expect(quoteNumber(12.5)).toBe('12.5')
    expect(quoteNumber(-1)).toBe('(-1)')
    expect(`x -${quoteNumber(-1)}`).not.toContain('--')
    for (const bad of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, '1; DROP' as unknown as number]) {
      expect(() => quoteNumber(bad)).toThrow(TypeError)
    }
  })

  it('accepts only non-negative safe integers as integers', () => {
    expect(quoteInteger(42)).toBe('42')
    for (const bad of [-1, 1.5, 2 ** 60, Number.NaN]) expect(() => quoteInteger(bad)).toThrow(TypeError)
  })

  it('accepts only plain database names', () => {
    expect(databaseName('gw_e2e_1')).toBe('gw_e2e_1')
    for (const bad of ['', '1db', 'x; DROP', 'a.b', 'db`']) expect(() => databaseName(bad)).toThrow(TypeError)
  })
})
