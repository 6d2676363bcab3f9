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
    /**
     * Persisted usage of a budget period is deleted this many days after the period ended (its
     * counter is never read again once it ended); usage of lifetime limits is kept.
     */
    usageRetentionDays: z.number().int().min(1).max(36_500).default(90),
    /** How often that pruning runs (also once at start); each instance runs it, and it is idempotent. */
    usagePruneIntervalMs: z.number().int().min(1_000).max(7 * 86_400_000).default(21_600_000),
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
