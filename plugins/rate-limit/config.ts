import { z } from 'zod'

/** rate-limit plugin settings (`plugins.rate-limit.config`). */
export const rateLimitConfigSchema = z
  .object({
    /**
     * What a request gets when the limiter's store (Redis) cannot be reached: `open` lets it pass
     * unlimited, `closed` refuses it with 503. Either way the failure is logged and counted.
     */
    failMode: z.enum(['open', 'closed']).default('open'),
  })
  .strict()

export type RateLimitConfig = z.infer<typeof rateLimitConfigSchema>
