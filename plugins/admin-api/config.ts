import { z } from 'zod'

/** admin-api plugin settings (`plugins.admin-api.config`). */
export const adminApiConfigSchema = z
  .object({
    /** Base URL of invite links (`{publicUrl}/v1/invites/{token}`); set from `GATEWAY_PUBLIC_URL`. */
    publicUrl: z.url({ protocol: /^https?$/ }).default('http://localhost:8787'),
    /** How long an invite link stays valid (default 7 days). */
    inviteTtlMs: z.number().int().min(60_000).default(7 * 24 * 3_600_000),
    /** How long a log export's signed download URL stays valid (default 1 hour). */
    exportLinkTtlMs: z.number().int().min(60_000).max(7 * 24 * 3_600_000).default(3_600_000),
    /** Export jobs one instance runs at a time; more starts answer 409 until one ends. */
    maxRunningExports: z.number().int().min(1).max(64).default(4),
  })
  .strict()

export type AdminApiConfig = z.infer<typeof adminApiConfigSchema>
