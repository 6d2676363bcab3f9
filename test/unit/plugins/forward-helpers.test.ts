import { describe, expect, it } from 'vitest'
import { normaliseProviderError } from '../../../plugins/forward/provider-error.js'
import { extractUsage } from '../../../plugins/forward/usage.js'

describe('extractUsage', () => {
  it('reads the usage of a chat completion', () => {
    const body = JSON.stringify({ id: 'x', choices: [{ message: { content: 'the "usage": trap' } }], usage: { prompt_tokens: 12, completion_tokens: 5, total_tokens: 17, prompt_tokens_details: { cached_tokens: 4 } } })
    expect(extractUsage(Buffer.from(body))).toEqual({ promptTokens: 12, completionTokens: 5, totalTokens: 17, cachedTokens: 4 })
  })

  it('reads the final usage chunk of a stream and ignores "usage": null chunks', () => {
    const stream = [
      'data: {"choices":[{"delta":{"content":"hi"}}],"usage":null}',
      'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}',
      'data: [DONE]',
      '',
    ].join('\n\n')
    expect(extractUsage(Buffer.from(stream))).toEqual({ promptTokens: 3, completionTokens: 2, totalTokens: 5, cachedTokens: 0 })
  })

  it('returns null when there is no usage or it is cut off', () => {
    expect(extractUsage(Buffer.from('{"object":"list"}'))).toBeNull()
    expect(extractUsage(Buffer.from('"usage":{"prompt_tokens":3,'))).toBeNull()
    expect(extractUsage(Buffer.from('data: {"usage":null}\n\n'))).toBeNull()
  })

  it('reads the usage after multi-byte text, also when the tail starts inside a character', () => {
    const body = Buffer.from(JSON.stringify({ choices: [{ message: { content: 'héllo wörld {"usage": 😀} \\" }' } }], usage: { prompt_tokens: 6, completion_tokens: 4, total_tokens: 10 } }))
    const expected = { promptTokens: 6, completionTokens: 4, totalTokens: 10, cachedTokens: 0 }
    expect(extractUsage(body)).toEqual(expected)
    // Cut one byte into "é" (0xc3 0xa9): the tail starts with a continuation byte.
    const cut = body.indexOf(Buffer.from('é')) + 1
    expect(extractUsage(body.subarray(cut))).toEqual(expected)
  })

  it('keeps looking before a usage that cannot be read, down to the first byte', () => {
    expect(extractUsage(Buffer.from('"usage":{"prompt_tokens":2,"total_tokens":2} "usage":null'))).toEqual({ promptTokens: 2, completionTokens: 0, totalTokens: 2, cachedTokens: 0 })
    expect(extractUsage(Buffer.from('"usage":null'))).toBeNull()
  })

  it('reads a pretty-printed usage with CRLF line ends', () => {
    const body = Buffer.from('{\r\n  "usage" :\r\n  {\r\n    "prompt_tokens": 3,\r\n    "completion_tokens": 1,\r\n    "total_tokens": 4\r\n  }\r\n}')
    expect(extractUsage(body)).toEqual({ promptTokens: 3, completionTokens: 1, totalTokens: 4, cachedTokens: 0 })
  })

  it('reads embeddings usage (no completion tokens)', () => {
    expect(extractUsage(Buffer.from('{"usage":{"prompt_tokens":8,"total_tokens":8}}'))).toEqual({ promptTokens: 8, completionTokens: 0, totalTokens: 8, cachedTokens: 0 })
  })
})

describe('normaliseProviderError', () => {
  it('keeps an OpenAI-shaped body unchanged', () => {
    const body = Buffer.from('{"error":{"message":"Rate limit","type":"requests","code":"rate_limit_exceeded"}}')
    expect(normaliseProviderError('groq', 429, body)).toBe(body)
  })

  it('wraps other JSON and plain text into the OpenAI shape with the provider named', () => {
    expect(JSON.parse(String(normaliseProviderError('mistral-ai', 400, Buffer.from('{"message":"bad model"}'))))).toEqual({
      error: { message: 'mistral-ai error: bad model', type: 'invalid_request_error', param: null, code: null },
    })
    expect(JSON.parse(String(normaliseProviderError('x-ai', 503, Buffer.from('<html>Service Unavailable</html>'))))).toEqual({
      error: { message: 'x-ai error: <html>Service Unavailable</html>', type: 'upstream_error', param: null, code: null },
    })
    expect(JSON.parse(String(normaliseProviderError('x-ai', 401, Buffer.from('{"error":"no key"}')))).error.type).toBe('authentication_error')
  })
})
