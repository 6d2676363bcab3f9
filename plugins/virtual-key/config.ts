import { z } from 'zod'

/** virtual-key plugin settings (`plugins.virtual-key.config`). */
export const virtualKeyConfigSchema = z
  .object({
    /** How long a resolved virtual key stays cached in process (change notifications evict it sooner). */
    cacheTtlMs: z.number().int().min(0).default(60_000),
    /** How long an unknown slug is remembered as unknown (protects the store from floods of made-up slugs). */
    negativeCacheTtlMs: z.number().int().min(0).default(2_000),
    maxCacheEntries: z.number().int().min(1).default(10_000),
  })
  .strict()

export type VirtualKeyConfig = z.infer<typeof virtualKeyConfigSchema>
