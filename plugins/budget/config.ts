/** Settings of the budget plugin (`plugins.budget.config`). */
import { z } from 'zod'

export const budgetConfigSchema = z
  .object({
    /** Output tokens reserved for a text request that sets no `max_tokens` / `max_completion_tokens`. */
    defaultMaxOutputTokens: z.number().int().min(0).default(4096),
    /** How often settled usage is written to the usage store (batched per counter). */
    persistIntervalMs: z.number().int().min(10).max(60_000).default(500),
    /** A reservation never settled (its instance crashed) stops counting after this long. */
    reservationLeaseMs: z.number().int().min(60_000).max(86_400_000).default(900_000),
    /** A price file shaped like config/pricing.json, layered over it (whole model entries replaced). */
    pricingFile: z.string().min(1).nullable().default(null),
    /**
     * Price overrides `{ "<provider>": { "<model>": { input, output, cachedInput?, reasoning? } } }`
     * in USD per million tokens, layered last; validated when the price table is built.
     */
    prices: z.record(z.string(), z.unknown()).nullable().default(null),
  })
  .strict()

export type BudgetConfig = z.infer<typeof budgetConfigSchema>
