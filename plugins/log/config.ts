import { z } from 'zod'

/** log plugin settings (`plugins.log.config`). */
export const logConfigSchema = z
  .object({
    /**
     * Longest `x-gateway-metadata` header whose pairs are stored in a record; a longer one is stored
     * as no metadata. Core checks the header on every data-plane request whether or not this plugin
     * runs (400 for a value that is not a JSON object of at most 64 strings of at most 1024
     * characters, or longer than 8192 characters), so only a value below 8192 lowers anything.
     */
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
