import { z } from 'zod'

/** audit plugin settings (`plugins.audit.config`). */
export const auditConfigSchema = z
  .object({
    /**
     * Entries kept in memory while the admin store refuses writes. Past it a new entry is not
     * queued but logged at error level with its content, so the process cannot grow without bound.
     */
    maxQueue: z.number().int().min(1).default(10_000),
    /** First retry delay after a failed write; doubles on each failed retry up to `retryMaxMs`. */
    retryInitialMs: z.number().int().min(1).default(250),
    retryMaxMs: z.number().int().min(1).default(30_000),
  })
  .strict()
  .refine((config) => config.retryMaxMs >= config.retryInitialMs, { message: 'retryMaxMs must be at least retryInitialMs', path: ['retryMaxMs'] })

export type AuditConfig = z.infer<typeof auditConfigSchema>
