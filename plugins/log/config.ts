import { z } from 'zod'

/** log plugin settings (`plugins.log.config`). */
export const logConfigSchema = z
  .object({
    /** Longest `x-gateway-metadata` header value accepted into a record; longer values are dropped. */
    maxMetadataBytes: z.number().int().min(0).default(8192),
  })
  .strict()

export type LogConfig = z.infer<typeof logConfigSchema>
