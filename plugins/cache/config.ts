/** Settings of the cache plugin (`plugins.cache.config`). */
import { z } from 'zod'

const MIB = 1_048_576

export const cacheConfigSchema = z
  .object({
    /** A reply larger than this (a stream: all its events) is not stored. */
    maxEntryBytes: z.number().int().min(1).max(64 * MIB).default(MIB),
    /** Most bytes the in-process store holds (least recently used entries go first); unused with Redis. */
    maxBytes: z.number().int().min(MIB).max(64 * 1024 * MIB).default(64 * MIB),
    /**
     * A request whose body sent upstream is larger than this is neither looked up nor stored
     * (`DISABLED`): its key would cost a normalisation of the whole body, and such requests rarely repeat.
     */
    maxRequestBytes: z.number().int().min(1).max(64 * MIB).default(MIB),
    /** Redis lookups and writes not answered within this fail (a lookup is then a miss). */
    redisCommandTimeoutMs: z.number().int().min(10).max(60_000).default(500),
    /** Writes waiting for the store at once; more are dropped (counted), so a slow store never piles up replies in memory. */
    maxPendingWrites: z.number().int().min(1).max(100_000).default(1_000),
  })
  .strict()

export type CacheConfig = z.infer<typeof cacheConfigSchema>
