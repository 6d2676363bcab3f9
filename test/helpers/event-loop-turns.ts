/**
 * Counts event-loop turns, to check by structure (never by timing) that work on a large batch is
 * spread over many turns: `mark()` inside the work notes the current turn, `mostInOneTurn` is the
 * largest number of marks any one turn received. A `setImmediate` chain advances the count once
 * per loop iteration, so work that yields with `setImmediate` (or to I/O) between slices lands in
 * different turns, and work done in one synchronous run lands in one.
 */
import { vi } from 'vitest'
import type { LogRecord } from '../../core/logs.js'
import { logRecord } from './log-records.js'

export interface TurnCounter {
  /** Notes one unit of work in the current turn. */
  mark(): void
  /** Marks in the busiest turn. */
  readonly mostInOneTurn: number
  /** Turns that received at least one mark. */
  readonly turnsUsed: number
  readonly marks: number
  stop(): void
}

export function countTurns(): TurnCounter {
  let turn = 0
  let handle: NodeJS.Immediate | null = null
  const tick = (): void => {
    turn += 1
    handle = setImmediate(tick)
  }
  handle = setImmediate(tick)
  const perTurn = new Map<number, number>()
  let marks = 0
  return {
    mark() {
      marks += 1
      perTurn.set(turn, (perTurn.get(turn) ?? 0) + 1)
    },
    get mostInOneTurn() {
      return Math.max(0, ...perTurn.values())
    },
    get turnsUsed() {
      return perTurn.size
    },
    get marks() {
      return marks
    },
    stop() {
      if (handle !== null) clearImmediate(handle)
      handle = null
    },
  }
}

/** A log record whose `id` marks `turns` each time it is read: a sink's check reads it once per record. */
export function watchedLogRecord(turns: TurnCounter): LogRecord {
  const record = logRecord()
  const id = record.id
  Object.defineProperty(record, 'id', { enumerable: true, get: () => (turns.mark(), id) })
  return record
}

/**
 * Runs `work` (which enqueues `watched()` records and flushes) while counting, per turn, the
 * records the sink checks and the lines `writer` serialises (its prototype's `logLine`, spied).
 */
export async function watchBatchWork(
  writer: { prototype: { logLine(record: LogRecord): string } },
  work: (watched: () => LogRecord) => Promise<void>,
): Promise<{ checks: TurnCounter; lines: TurnCounter }> {
  const checks = countTurns()
  const lines = countTurns()
  const logLine = writer.prototype.logLine
  const spy = vi.spyOn(writer.prototype, 'logLine').mockImplementation(function (this: unknown, record: LogRecord) {
    lines.mark()
    return logLine.call(this, record)
  })
  try {
    await work(() => watchedLogRecord(checks))
    return { checks, lines }
  } finally {
    spy.mockRestore()
    checks.stop()
    lines.stop()
  }
}
