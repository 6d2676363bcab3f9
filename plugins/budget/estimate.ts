/**
 * What a request may use at most, estimated before it is forwarded (no tokenizer on the hot path):
 * - prompt tokens: the JSON body's length / 4 (an over-estimate for English prose, since field
 *   names and punctuation count too); raw uploads (audio) count 0;
 * - output tokens: `max_tokens`, `max_completion_tokens` or `max_output_tokens` when the body sets
 *   one, else the configured default cap for routes that generate text; embeddings, audio and
 *   images generate no tokens.
 * Pass-through bodies are parsed here only when they look like a JSON object of bounded size.
 */
import type { JsonObject, RequestContext } from '../../core/context.js'

export interface RequestEstimate {
  /** The model named by the body, if any. */
  readonly model: string | null
  readonly promptTokens: number
  readonly maxOutputTokens: number
}

const TEXT_ROUTES = new Set(['chat.completions', 'completions'])
const NO_OUTPUT_ROUTES = new Set(['embeddings', 'audio.speech', 'audio.transcriptions', 'audio.translations', 'images.generations', 'models.list'])
const OUTPUT_CAP_FIELDS = ['max_tokens', 'max_completion_tokens', 'max_output_tokens'] as const
/** Pass-through bodies larger than this are not parsed (their prompt estimate still counts). */
const MAX_PARSED_PASSTHROUGH_BYTES = 1_048_576
const OPEN_BRACE = 0x7b

function outputCap(body: JsonObject): number | null {
  for (const field of OUTPUT_CAP_FIELDS) {
    const value = body[field]
    if (typeof value === 'number' && Number.isFinite(value) && value >= 0) return Math.ceil(value)
  }
  return null
}

/** The body of a pass-through request, when it is a small JSON object. */
function passthroughBody(raw: Buffer | null): JsonObject | null {
  if (raw === null || raw.length === 0 || raw.length > MAX_PARSED_PASSTHROUGH_BYTES) return null
  let start = 0
  while (start < raw.length && (raw[start] === 0x20 || raw[start] === 0x0a || raw[start] === 0x0d || raw[start] === 0x09)) start++
  if (raw[start] !== OPEN_BRACE) return null
  try {
    const parsed: unknown = JSON.parse(raw.toString('utf8'))
    return parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as JsonObject) : null
  } catch {
    return null
  }
}

/** The worst case of one request. */
export function estimateRequest(ctx: Pick<RequestContext, 'route' | 'rawBody' | 'body'>, defaultMaxOutputTokens: number): RequestEstimate {
  const routeId = ctx.route.id
  const raw = ctx.rawBody
  let body = ctx.body
  if (body === null && routeId === 'passthrough') body = passthroughBody(raw)
  const model = body !== null && typeof body.model === 'string' && body.model.length > 0 ? body.model : null
  // A raw body that is not JSON (an audio upload) is not text to tokenize.
  const promptTokens = body === null || raw === null ? 0 : Math.ceil(raw.length / 4)
  let maxOutputTokens = 0
  if (body !== null && !NO_OUTPUT_ROUTES.has(routeId)) {
    const cap = outputCap(body)
    // Pass-through generation (a body naming a model) may produce as much as a completion.
    if (cap !== null) maxOutputTokens = cap
    else if (TEXT_ROUTES.has(routeId) || model !== null) maxOutputTokens = defaultMaxOutputTokens
  }
  return { model, promptTokens, maxOutputTokens }
}
