import { z } from 'zod'

/** routing plugin settings (`plugins.routing.config`). */
export const routingConfigSchema = z
  .object({
    /** How long a saved config stays cached in process (`configs` change notifications evict it sooner). */
    cacheTtlMs: z.number().int().min(0).default(60_000),
    /** How long an unknown slug is remembered as unknown (protects the store from floods of made-up slugs). */
    negativeCacheTtlMs: z.number().int().min(0).default(2_000),
    maxCacheEntries: z.number().int().min(1).default(10_000),
    /** Compiled inline configs kept by their text, so a client repeating one pays the check once. */
    maxInlineEntries: z.number().int().min(0).default(1_000),
  })
  .strict()

export type RoutingPluginConfig = z.infer<typeof routingConfigSchema>
