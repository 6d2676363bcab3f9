/**
 * The error catalogue and its two wire formats.
 *
 * Every error the gateway itself produces is a `GatewayError` made from one entry of `ERRORS`.
 * Expected rejections are *returned* from plugin hooks; anything *thrown* is a bug and becomes
 * `GW_INTERNAL` (500) with the real error logged.
 *
 * Wire formats:
 * - data plane (inference, pass-through): the OpenAI shape `{"error":{message,type,param,code}}`,
 *   which OpenAI clients already parse; `code` is the catalogue code. Routes that speak the
 *   Anthropic Messages API answer `{"type":"error","error":{type,message}}` instead (API.md §2).
 * - control plane (Admin API): `{"success":false,"data":{message,errorCode}}` with `ABnn` codes.
 * - an error after a stream started: one final event in the route's stream format
 *   (`toStreamErrorEvent`), then the stream ends.
 *
 * The README's error table lists every code; `test/unit/core/errors.test.ts` keeps them in step.
 */

/** OpenAI-style error `type` strings, plus the gateway's own. */
export const ERROR_TYPES = [
  'invalid_request_error',
  'authentication_error',
  'permission_error',
  'not_found_error',
  'conflict_error',
  'gone_error',
  'rate_limit_error',
  'budget_exceeded_error',
  'timeout_error',
  'upstream_error',
  'service_unavailable_error',
  'api_error',
] as const
export type ErrorType = (typeof ERROR_TYPES)[number]

/** Control-plane error codes (API.md §5). */
export type AdminErrorCode = 'AB01' | 'AB03' | 'AB04' | 'AB05' | 'AB06' | 'AB07' | 'AB08'

/** One catalogue entry. `message` is the default text; a detail may replace it per occurrence. */
export interface ErrorSpec {
  readonly code: string
  readonly status: number
  readonly type: ErrorType
  readonly adminCode: AdminErrorCode
  readonly message: string
}

function defineError(
  code: string,
  status: number,
  type: ErrorType,
  adminCode: AdminErrorCode,
  message: string,
): ErrorSpec {
  return Object.freeze({ code, status, type, adminCode, message })
}

/** The catalogue. Keys equal their `code`; areas: REQ, AUTH, SCOPE, VIRTUAL_KEY, PROMPT, CONFIG, ADMIN, LOGS, RATE_LIMIT, BUDGET, UPSTREAM, UNAVAILABLE, INTERNAL. */
export const ERRORS = {
  // Request shape
  GW_REQ_MALFORMED_JSON: defineError('GW_REQ_MALFORMED_JSON', 400, 'invalid_request_error', 'AB01', 'The request body is not valid JSON'),
  GW_REQ_INVALID: defineError('GW_REQ_INVALID', 400, 'invalid_request_error', 'AB01', 'The request is invalid'),
  GW_REQ_BODY_TOO_LARGE: defineError('GW_REQ_BODY_TOO_LARGE', 413, 'invalid_request_error', 'AB01', 'The request body is larger than the limit'),
  GW_REQ_HEADERS_TOO_LARGE: defineError('GW_REQ_HEADERS_TOO_LARGE', 431, 'invalid_request_error', 'AB01', 'The request header fields are larger than the limit'),
  GW_REQ_ROUTE_NOT_FOUND: defineError('GW_REQ_ROUTE_NOT_FOUND', 404, 'not_found_error', 'AB08', 'No route matches this path'),
  GW_REQ_METHOD_NOT_ALLOWED: defineError('GW_REQ_METHOD_NOT_ALLOWED', 405, 'invalid_request_error', 'AB01', 'This method is not allowed on this path'),
  GW_REQ_PROVIDER_MISSING: defineError('GW_REQ_PROVIDER_MISSING', 400, 'invalid_request_error', 'AB01', 'Missing provider selection: send x-gateway-provider, x-gateway-virtual-key or x-gateway-config'),
  GW_REQ_PROVIDER_UNKNOWN: defineError('GW_REQ_PROVIDER_UNKNOWN', 400, 'invalid_request_error', 'AB01', 'Unknown provider'),
  GW_REQ_CUSTOM_HOST_REFUSED: defineError('GW_REQ_CUSTOM_HOST_REFUSED', 400, 'invalid_request_error', 'AB01', 'The custom host is not allowed'),
  GW_REQ_ROUTE_UNSUPPORTED: defineError('GW_REQ_ROUTE_UNSUPPORTED', 400, 'invalid_request_error', 'AB01', 'This provider does not support this route'),
  // Authentication
  GW_AUTH_KEY_MISSING: defineError('GW_AUTH_KEY_MISSING', 401, 'authentication_error', 'AB05', 'Missing gateway API key: send it in x-gateway-api-key'),
  GW_AUTH_KEY_INVALID: defineError('GW_AUTH_KEY_INVALID', 401, 'authentication_error', 'AB05', 'Invalid API key'),
  GW_AUTH_KEY_EXPIRED: defineError('GW_AUTH_KEY_EXPIRED', 401, 'authentication_error', 'AB05', 'The API key has expired'),
  GW_AUTH_TOKEN_INVALID: defineError('GW_AUTH_TOKEN_INVALID', 401, 'authentication_error', 'AB05', 'Invalid token'),
  GW_AUTH_TOKEN_EXPIRED: defineError('GW_AUTH_TOKEN_EXPIRED', 401, 'authentication_error', 'AB05', 'The token has expired'),
  GW_AUTH_UNAVAILABLE: defineError('GW_AUTH_UNAVAILABLE', 503, 'service_unavailable_error', 'AB04', 'Authentication is temporarily unavailable'),
  // Authorisation
  GW_SCOPE_MISSING: defineError('GW_SCOPE_MISSING', 403, 'permission_error', 'AB03', 'You do not have enough permissions to execute this request'),
  GW_SCOPE_ADMIN_KEY_ON_DATA_PLANE: defineError('GW_SCOPE_ADMIN_KEY_ON_DATA_PLANE', 403, 'permission_error', 'AB03', 'Admin API keys cannot make data-plane requests: use a workspace API key'),
  GW_SCOPE_ADMIN_KEY_REQUIRED: defineError('GW_SCOPE_ADMIN_KEY_REQUIRED', 403, 'permission_error', 'AB03', 'This operation needs an Admin API key'),
  // Virtual keys (x-gateway-virtual-key)
  GW_VIRTUAL_KEY_NOT_FOUND: defineError('GW_VIRTUAL_KEY_NOT_FOUND', 404, 'not_found_error', 'AB08', 'Virtual key not found'),
  GW_VIRTUAL_KEY_EXPIRED: defineError('GW_VIRTUAL_KEY_EXPIRED', 401, 'authentication_error', 'AB05', 'The virtual key has expired'),
  GW_VIRTUAL_KEY_UNAVAILABLE: defineError('GW_VIRTUAL_KEY_UNAVAILABLE', 503, 'service_unavailable_error', 'AB04', 'Virtual keys are temporarily unavailable'),
  // Prompt templates (POST /v1/prompts/{id}/completions and /render)
  GW_PROMPT_NOT_FOUND: defineError('GW_PROMPT_NOT_FOUND', 404, 'not_found_error', 'AB08', 'Invalid prompt id'),
  GW_PROMPT_VARIABLE_MISSING: defineError('GW_PROMPT_VARIABLE_MISSING', 400, 'invalid_request_error', 'AB01', 'A variable the prompt template uses is missing'),
  GW_PROMPT_PARTIAL_NOT_FOUND: defineError('GW_PROMPT_PARTIAL_NOT_FOUND', 400, 'invalid_request_error', 'AB01', 'A partial the prompt template uses does not exist'),
  GW_PROMPT_TEMPLATE_INVALID: defineError('GW_PROMPT_TEMPLATE_INVALID', 400, 'invalid_request_error', 'AB01', 'The prompt template cannot be rendered'),
  GW_PROMPT_UNAVAILABLE: defineError('GW_PROMPT_UNAVAILABLE', 503, 'service_unavailable_error', 'AB04', 'Prompt templates are temporarily unavailable'),
  // Configs (x-gateway-config, a key's default config; API.md §4)
  GW_CONFIG_INVALID: defineError('GW_CONFIG_INVALID', 400, 'invalid_request_error', 'AB01', 'The config is invalid'),
  GW_CONFIG_NOT_FOUND: defineError('GW_CONFIG_NOT_FOUND', 404, 'not_found_error', 'AB08', 'Config not found'),
  GW_CONFIG_NO_TARGET: defineError('GW_CONFIG_NO_TARGET', 400, 'invalid_request_error', 'AB01', 'No condition of the config matched and it has no default target'),
  GW_CONFIG_UNAVAILABLE: defineError('GW_CONFIG_UNAVAILABLE', 503, 'service_unavailable_error', 'AB04', 'Configs are temporarily unavailable'),
  GW_CIRCUIT_OPEN: defineError('GW_CIRCUIT_OPEN', 503, 'service_unavailable_error', 'AB04', 'Every target of the config is cooling down after failures (circuit open)'),
  // Admin API
  GW_ADMIN_VALIDATION: defineError('GW_ADMIN_VALIDATION', 400, 'invalid_request_error', 'AB01', 'Validation failed'),
  GW_ADMIN_NOT_FOUND: defineError('GW_ADMIN_NOT_FOUND', 404, 'not_found_error', 'AB08', 'Resource not found'),
  GW_ADMIN_FORBIDDEN: defineError('GW_ADMIN_FORBIDDEN', 403, 'permission_error', 'AB03', 'Your role does not allow this operation'),
  GW_ADMIN_DEPENDANTS: defineError('GW_ADMIN_DEPENDANTS', 409, 'conflict_error', 'AB07', 'Unable to delete: the resource still has dependants'),
  GW_ADMIN_STALE: defineError('GW_ADMIN_STALE', 409, 'conflict_error', 'AB07', 'The resource was changed by another request: read it again and retry'),
  GW_ADMIN_GONE: defineError('GW_ADMIN_GONE', 410, 'gone_error', 'AB08', 'This invite can no longer be used'),
  GW_ADMIN_CONFLICT: defineError('GW_ADMIN_CONFLICT', 409, 'conflict_error', 'AB07', 'The resource already exists'),
  // Request logs (analytics, feedback, custom logs, exports)
  GW_LOGS_DISABLED: defineError('GW_LOGS_DISABLED', 503, 'service_unavailable_error', 'AB04', 'Request logs are turned off on this gateway (the log plugin is disabled)'),
  GW_LOGS_UNAVAILABLE: defineError('GW_LOGS_UNAVAILABLE', 503, 'service_unavailable_error', 'AB04', 'The log store cannot be reached right now; try again shortly'),
  // Rate limits (the message names the entity, masked; 429 carries Retry-After)
  GW_RATE_LIMITED: defineError('GW_RATE_LIMITED', 429, 'rate_limit_error', 'AB06', 'Rate limit exceeded'),
  GW_RATE_LIMIT_UNAVAILABLE: defineError('GW_RATE_LIMIT_UNAVAILABLE', 503, 'service_unavailable_error', 'AB04', 'Rate limits cannot be checked right now'),
  // Budgets (data plane only; AB06, the closest control-plane code, is never sent)
  GW_BUDGET_EXHAUSTED: defineError('GW_BUDGET_EXHAUSTED', 412, 'budget_exceeded_error', 'AB06', 'Usage limit exceeded'),
  GW_BUDGET_UNAVAILABLE: defineError('GW_BUDGET_UNAVAILABLE', 503, 'service_unavailable_error', 'AB04', 'Budgets cannot be checked right now'),
  // Upstream
  GW_UPSTREAM_UNREACHABLE: defineError('GW_UPSTREAM_UNREACHABLE', 502, 'upstream_error', 'AB04', 'The provider could not be reached'),
  GW_UPSTREAM_TIMEOUT: defineError('GW_UPSTREAM_TIMEOUT', 504, 'timeout_error', 'AB04', 'The provider did not answer in time'),
  GW_UPSTREAM_REQUEST_TIMEOUT: defineError('GW_UPSTREAM_REQUEST_TIMEOUT', 408, 'timeout_error', 'AB04', 'Request exceeded the timeout sent in the request'),
  GW_UPSTREAM_STREAM_BROKEN: defineError('GW_UPSTREAM_STREAM_BROKEN', 502, 'upstream_error', 'AB04', 'The provider stream ended with an error'),
  // Gateway itself
  GW_UNAVAILABLE: defineError('GW_UNAVAILABLE', 503, 'service_unavailable_error', 'AB04', 'The gateway is shutting down'),
  GW_INTERNAL: defineError('GW_INTERNAL', 500, 'api_error', 'AB04', 'Internal gateway error'),
} as const satisfies Record<string, ErrorSpec>

export type ErrorCode = keyof typeof ERRORS

/**
 * An error the gateway reports to a client. `message` is always safe to show: never put secrets,
 * stack traces or driver messages in it. `headers` are added to the reply (e.g. `Retry-After`).
 */
export class GatewayError extends Error {
  readonly code: string
  readonly status: number
  readonly type: ErrorType
  readonly adminCode: AdminErrorCode
  /** The request field the error is about, when there is one (OpenAI `param`). */
  readonly param: string | null
  readonly headers: ReadonlyArray<readonly [string, string]> | null

  constructor(
    spec: ErrorSpec,
    message?: string,
    options?: { param?: string; headers?: ReadonlyArray<readonly [string, string]>; cause?: unknown },
  ) {
    super(message ?? spec.message, options?.cause === undefined ? undefined : { cause: options.cause })
    this.name = 'GatewayError'
    this.code = spec.code
    this.status = spec.status
    this.type = spec.type
    this.adminCode = spec.adminCode
    this.param = options?.param ?? null
    this.headers = options?.headers ?? null
  }
}

/** Builds a `GatewayError` from a catalogue entry; `message` replaces the default text. */
export function gatewayError(
  spec: ErrorSpec,
  message?: string,
  options?: { param?: string; headers?: ReadonlyArray<readonly [string, string]>; cause?: unknown },
): GatewayError {
  return new GatewayError(spec, message, options)
}

/** True for `GatewayError` instances (of this module copy: `instanceof`). */
export function isGatewayError(value: unknown): value is GatewayError {
  return value instanceof GatewayError
}

/** The data-plane (OpenAI-shaped) error body. */
export function toDataPlaneBody(error: GatewayError): string {
  return JSON.stringify({
    error: { message: error.message, type: error.type, param: error.param, code: error.code },
  })
}

/** The control-plane (Admin API) error body. */
export function toControlPlaneBody(error: GatewayError): string {
  return JSON.stringify({ success: false, data: { message: error.message, errorCode: error.adminCode } })
}

/**
 * The API a data-plane route speaks (API.md §2, "Inbound formats"); it decides the shape of the
 * route's errors: `openai` (chat/completions and the other OpenAI routes), `responses` (OpenAI
 * Responses: the OpenAI error body, its own stream error event), `messages` (Anthropic Messages).
 */
export type ApiFormat = 'openai' | 'responses' | 'messages'

/** The Anthropic Messages error body, for routes in the `messages` format. */
export function toMessagesBody(error: GatewayError): string {
  return JSON.stringify({ type: 'error', error: { type: error.type, message: error.message } })
}

/**
 * The single SSE event sent when a stream fails after it started (API.md §2), in the stream's own
 * format, so the client's stream parser reads it as an error rather than failing on it:
 * - `openai`: `data: {"error":{message,type,code}}` (the `openai` client raises it);
 * - `responses`: `event: error` + `{"type":"error","code","message","param","sequence_number"}`;
 * - `messages`: `event: error` + `{"type":"error","error":{type,message}}`.
 * @param sequenceNumber the Responses event's `sequence_number` (ignored by the other formats)
 */
export function toStreamErrorEvent(error: GatewayError, format: ApiFormat = 'openai', sequenceNumber = 0): string {
  if (format === 'responses') {
    const payload = { type: 'error', code: error.code, message: error.message, param: error.param, sequence_number: sequenceNumber }
    return `event: error\ndata: ${JSON.stringify(payload)}\n\n`
  }
  if (format === 'messages') return `event: error\ndata: ${toMessagesBody(error)}\n\n`
  return `data: ${JSON.stringify({ error: { message: error.message, type: error.type, code: error.code } })}\n\n`
}
