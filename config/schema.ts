/** The root configuration schema (plugin configs are validated by each plugin's own schema). */
import { z } from 'zod'

const pluginSettings = z
  .object({
    enabled: z.boolean(),
    priority: z.number().int().optional(),
    config: z.unknown().optional(),
  })
  .strict()

export const gatewayConfigSchema = z
  .object({
    server: z
      .object({
        host: z.string().min(1),
        port: z.number().int().min(0).max(65535),
        maxJsonBodyBytes: z.number().int().min(1),
        maxUploadBodyBytes: z.number().int().min(1),
        /** How long shutdown waits for in-flight requests before closing anyway. */
        shutdownGraceMs: z.number().int().min(0),
      })
      .strict(),
    upstream: z
      .object({
        connectionsPerOrigin: z.number().int().min(1),
        keepAliveTimeoutMs: z.number().int().min(1),
        connectTimeoutMs: z.number().int().min(1),
        headersTimeoutMs: z.number().int().min(1),
        bodyTimeoutMs: z.number().int().min(1),
      })
      .strict(),
    logSink: z
      .object({
        batchSize: z.number().int().min(1),
        flushIntervalMs: z.number().int().min(1),
        maxQueue: z.number().int().min(1),
      })
      .strict(),
    plugins: z.record(z.string(), pluginSettings),
  })
  .strict()

export type GatewayConfig = z.infer<typeof gatewayConfigSchema>

/** Settings that come only from the environment (secrets and locations). */
export interface GatewayEnvironment {
  readonly dataDir: string
  readonly allowedCustomHosts: readonly string[]
  readonly logLevel: string
  /** `MONGODB_URI`: the admin store runs on MongoDB when set, on the embedded DuckDB file otherwise. */
  readonly mongodbUri: string | null
  /** `REDIS_URL`: change notifications go through Redis pub/sub when set, stay in process otherwise. */
  readonly redisUrl: string | null
  /**
   * `GATEWAY_PUBLIC_URL`: the base URL clients and browsers reach this gateway at (invite links),
   * without a trailing slash; `http://localhost:<port>` when unset.
   */
  readonly publicUrl: string
}
