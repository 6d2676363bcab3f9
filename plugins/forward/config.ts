import { z } from 'zod'

/** forward plugin settings (`plugins.forward.config`). */
export const forwardConfigSchema = z
  .object({
    /**
     * Non-streamed upstream bodies up to this size (with a known length) are read whole and sent in
     * one write; larger or unknown-length bodies are streamed through.
     */
    maxBufferedResponseBytes: z.number().int().min(0).default(1024 * 1024),
    /** Client headers sent upstream on first-class routes (pass-through sends all but gateway and hop-by-hop headers). */
    forwardedRequestHeaders: z
      .array(z.string().min(1))
      .default(['content-type', 'accept', 'openai-organization', 'openai-project', 'openai-beta']),
    /** Upper bound for `x-gateway-request-timeout`. */
    maxRequestTimeoutMs: z.number().int().min(1).default(3_600_000),
    /**
     * Longest silence between two chunks of a provider's response body (a stream's events) once
     * its headers arrived, when the request sends no `x-gateway-request-timeout` (with one, that
     * value bounds the silence too). Past it the upstream request is aborted: a stream ends with a
     * `timeout_error` event (504 `GW_UPSTREAM_TIMEOUT`; 408 `GW_UPSTREAM_REQUEST_TIMEOUT` with the
     * header), a body not yet sent becomes that error reply.
     */
    idleTimeoutMs: z.number().int().min(1).default(60_000),
    /** Config retries: the first wait is between half and all of this, doubling per retry (API.md §4). */
    retryBaseDelayMs: z.number().int().min(0).default(250),
    /** Config retries: the longest backoff wait. */
    retryMaxDelayMs: z.number().int().min(0).default(10_000),
    /** Config retries with `use_retry_after_headers`: a 429 asking to wait longer than this is not retried. */
    maxRetryAfterMs: z.number().int().min(0).default(60_000),
    /** Seed for load-balanced picks (tests and benchmarks); unset: `Math.random`. */
    loadbalanceSeed: z.number().int().min(0).optional(),
  })
  .strict()

export type ForwardConfig = z.infer<typeof forwardConfigSchema>
