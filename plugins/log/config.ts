import { z } from 'zod'

/** log plugin settings (`plugins.log.config`). */
export const logConfigSchema = z
  .object({
    /** Longest `x-gateway-metadata` header value accepted into a record; longer values are dropped. */
    maxMetadataBytes: z.number().int().min(0).default(8192),
    /**
     * Whether records keep the request and response bodies (off by default: bodies may hold
     * personal data and dominate the log store's size). Each body is cut at `maxBytes` bytes and
     * then ends with a `[truncated]` marker. The response body is what the gateway still holds of
     * the reply when it ends, its last 16 KiB: a longer reply's logged body starts with the marker.
     */
    bodies: z
      .object({
        enabled: z.boolean().default(false),
        maxBytes: z.number().int().min(1).max(1_048_576).default(16_384),
      })
      .strict()
      .default({ enabled: false, maxBytes: 16_384 }),
  })
  .strict()

export type LogConfig = z.infer<typeof logConfigSchema>
