import { z } from 'zod'

/** auth plugin settings (`plugins.auth.config`). */
export const authConfigSchema = z
  .object({
    /** How long a resolved key stays cached in process (change notifications evict it sooner). */
    cacheTtlMs: z.number().int().min(0).default(60_000),
    /** How long an unknown key is remembered as unknown (protects the store from floods of bad keys). */
    negativeCacheTtlMs: z.number().int().min(0).default(2_000),
    maxCacheEntries: z.number().int().min(1).default(100_000),
    /** First-start seed. `adminKey` comes from `GATEWAY_BOOTSTRAP_ADMIN_KEY`; empty means generate one. */
    bootstrap: z
      .object({
        adminKey: z.string().default(''),
        organisationName: z.string().min(1).default('Default organisation'),
        ownerEmail: z.string().email().default('owner@localhost'),
        workspaceName: z.string().min(1).default('Default workspace'),
        /** Print the generated admin key and a first request to stdout (once, on first start). */
        print: z.boolean().default(true),
        /** Base URL shown in the printed example. */
        publicUrl: z.string().default('http://localhost:8787'),
      })
      .prefault({}),
  })
  .strict()

export type AuthConfig = z.infer<typeof authConfigSchema>
