import { z } from 'zod'

/** prompt-render plugin settings (`plugins.prompt-render.config`). */
export const promptRenderConfigSchema = z
  .object({
    /** How long a compiled prompt version stays cached in process (`prompts` change notifications drop it sooner). */
    cacheTtlMs: z.number().int().min(0).default(60_000),
    /** How long an unknown prompt, version or label is remembered as unknown (protects the store from floods of made-up ids). */
    negativeCacheTtlMs: z.number().int().min(0).default(2_000),
    /** Most compiled versions kept; when full, the one compiled longest ago goes first. */
    maxCacheEntries: z.number().int().min(1).default(10_000),
    /**
     * Longest rendered template, in characters (template text plus every use of every variable),
     * checked before rendering: a value used many times, or partials repeated inside partials,
     * must not make one request build an unbounded string.
     */
    maxRenderedChars: z.number().int().min(1).default(10_485_760),
  })
  .strict()

export type PromptRenderConfig = z.infer<typeof promptRenderConfigSchema>
