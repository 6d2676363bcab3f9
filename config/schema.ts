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
        /** Bytes the on-disk journal (`<dataDir>/log-journal/`) may hold while the log store is unreachable. */
        journalMaxBytes: z.number().int().min(1),
      })
      .strict(),
    embedded: z
      .object({
        /**
         * Memory the embedded DuckDB file (admin store, usage, logs) may keep, in MiB; raise it for
         * analytics over many logs. Not below 128: each log batch insert needs 32 MiB for DuckDB's
         * JSON reader on top of the rows appended since the last checkpoint (at 64 MiB inserts
         * failed under bench load and every record went to the journal).
         */
        memoryLimitMb: z.number().int().min(128),
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
  /**
   * `REDIS_URL`: change notifications go through Redis pub/sub, and rate-limit buckets and running
   * budget usage live in Redis, when set; all stay in process otherwise. `?cluster=true` on the URL
   * (e.g. `redis://10.0.0.1:6379?cluster=true`) runs the rate limiter and the budget ledger on Redis
   * Cluster with that node as the seed (their keys share a hash tag per workspace, so the one script
   * per request runs on one node).
   */
  readonly redisUrl: string | null
  /**
   * `CLICKHOUSE_URL`: request logs (and analytics) live in ClickHouse when set, in the embedded
   * DuckDB file otherwise. `url` is the HTTP interface without a path (credentials kept);
   * `database` is the URL's path, or `gateway`.
   */
  readonly clickhouse: { readonly url: string; readonly database: string } | null
  /**
   * `GATEWAY_MASTER_KEY` (64 hex characters or base64 of 32 bytes; checked when first used): the key
   * that encrypts virtual keys' provider credentials. Unset: the embedded store's
   * `<dataDir>/master.key` file (created 0600 on first start); required with MongoDB.
   */
  readonly masterKey: string | null
  /**
   * `GATEWAY_PUBLIC_URL`: the base URL clients and browsers reach this gateway at (invite links),
   * without a trailing slash; `http://localhost:<port>` when unset.
   */
  readonly publicUrl: string
}
