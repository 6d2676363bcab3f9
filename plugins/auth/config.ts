import { z } from 'zod'

/** A JWKS as an identity provider publishes it: `{"keys": [...]}` with public parameters only. */
const jwksSchema = z.object({ keys: z.array(z.record(z.string(), z.unknown())) }).loose()

/** auth plugin settings (`plugins.auth.config`). */
export const authConfigSchema = z
  .object({
    /** How long a resolved key stays cached in process (change notifications evict it sooner). */
    cacheTtlMs: z.number().int().min(0).default(60_000),
    /** How long an unknown key is remembered as unknown (protects the store from floods of bad keys). */
    negativeCacheTtlMs: z.number().int().min(0).default(2_000),
    maxCacheEntries: z.number().int().min(1).default(100_000),
    /** JWT verification (API.md §1). */
    jwt: z
      .object({
        /** How long a fetched JWKS is used before it is fetched again. */
        jwksCacheMaxAgeMs: z.number().int().min(0).default(600_000),
        /**
         * A token whose `kid` is not in the fetched JWKS triggers a refetch (the issuer rotated its
         * keys), but at most once per this period, so forged `kid`s cannot hammer the issuer.
         */
        jwksCooldownMs: z.number().int().min(0).default(30_000),
        /** Timeout of one JWKS fetch. */
        jwksTimeoutMs: z.number().int().min(1).default(5_000),
        /** Verified tokens kept in process (until their `exp`). */
        maxTokenCacheEntries: z.number().int().min(1).default(10_000),
      })
      .prefault({}),
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
        /**
         * JWKS URL of the first organisation (`GATEWAY_JWKS_URL`), written to its JWT settings at
         * every start when it differs from what is stored.
         */
        jwksUrl: z.url({ protocol: /^https?$/ }).nullable().default(null),
        /** Static JWKS of the first organisation (`GATEWAY_JWKS`, JSON), applied like `jwksUrl`. */
        jwks: jwksSchema.nullable().default(null),
        /**
         * The `iss` tokens of the first organisation must carry (`GATEWAY_JWT_ISSUER`). Part of the
         * settings `jwksUrl` / `jwks` write, so it needs one of them.
         */
        jwtIssuer: z.string().min(1).max(2048).nullable().default(null),
        /**
         * Audiences, one of which a token's `aud` must contain (`GATEWAY_JWT_AUDIENCE`, a comma
         * list). Needs `jwksUrl` or `jwks`, like `jwtIssuer`.
         */
        jwtAudience: z.array(z.string().min(1).max(2048)).min(1).max(20).nullable().default(null),
      })
      .refine((bootstrap) => bootstrap.jwksUrl === null || bootstrap.jwks === null, {
        message: 'set a JWKS URL (GATEWAY_JWKS_URL) or a static JWKS (GATEWAY_JWKS), not both',
        path: ['jwks'],
      })
      .refine((bootstrap) => (bootstrap.jwtIssuer === null && bootstrap.jwtAudience === null) || bootstrap.jwksUrl !== null || bootstrap.jwks !== null, {
        message: 'a JWT issuer or audience (GATEWAY_JWT_ISSUER / GATEWAY_JWT_AUDIENCE) needs a JWKS (GATEWAY_JWKS_URL or GATEWAY_JWKS)',
        path: ['jwtIssuer'],
      })
      .prefault({}),
  })
  .strict()

export type AuthConfig = z.infer<typeof authConfigSchema>
