/**
 * Time buckets of the analytics graphs. The API has no granularity parameter: the server picks it.
 *
 * Rule: the smallest step of `BUCKET_STEPS_SECONDS` (1 min, 5 min, 15 min, 1 h, 6 h, 1 day,
 * 1 week) for which the range spans at most `MAX_BUCKETS` buckets; ranges longer than 100 weeks
 * use weeks anyway. A bucket starts at a UTC epoch multiple of its step (`floor(t / step) * step`,
 * so days start at 00:00 UTC and weeks on Thursdays, the weekday of 1970-01-01), and covers
 * [start, start + step). The first bucket holds `from`, the last holds `to`; every bucket between
 * is present, zero-filled when no row fell in it.
 */

export const BUCKET_STEPS_SECONDS = [60, 300, 900, 3600, 21_600, 86_400, 604_800] as const
export const MAX_BUCKETS = 100

/** The bucket step in seconds for the range [fromMs, toMs]. */
export function bucketStepSeconds(fromMs: number, toMs: number): number {
  for (const step of BUCKET_STEPS_SECONDS) {
    if (bucketCount(fromMs, toMs, step) <= MAX_BUCKETS) return step
  }
  return BUCKET_STEPS_SECONDS[BUCKET_STEPS_SECONDS.length - 1] as number
}

/** Start (epoch seconds) of the bucket holding `ms`. */
export function bucketStart(ms: number, stepSeconds: number): number {
  return Math.floor(ms / 1000 / stepSeconds) * stepSeconds
}

function bucketCount(fromMs: number, toMs: number, step: number): number {
  if (toMs < fromMs) return 0
  return (bucketStart(toMs, step) - bucketStart(fromMs, step)) / step + 1
}

/** Every bucket start (epoch seconds) of the range, in order. */
export function bucketStarts(fromMs: number, toMs: number, stepSeconds: number): number[] {
  const starts: number[] = []
  if (toMs < fromMs) return starts
  const last = bucketStart(toMs, stepSeconds)
  for (let start = bucketStart(fromMs, stepSeconds); start <= last; start += stepSeconds) starts.push(start)
  return starts
}

/** ISO 8601 (UTC) of an epoch-seconds bucket start. */
export function bucketTimestamp(startSeconds: number): string {
  return new Date(startSeconds * 1000).toISOString()
}
