/**
 * What the Admin API accepts as a prompt or partial template (API.md §3), checked when it is saved
 * so a broken template is a 400 naming the problem, not a failure at its first run:
 * - a chat template is a JSON array of messages (`role`, and `content`: a string or an array of
 *   parts); anything that is not a JSON array is a completion template (plain text), unless
 *   `is_raw_template` says otherwise (1: plain text even if it reads as JSON; 0: must be a chat
 *   template);
 * - every string the renderer will run through Mustache (a message's `content`, each text part's
 *   `text`, a completion template or partial as a whole) must parse (`mustache`'s own parser), so
 *   unclosed tags and unbalanced sections are refused here;
 * - at most `MAX_TEMPLATE_BYTES` (UTF-8) and, for chat templates, nested at most `MAX_JSON_DEPTH`.
 * The renderer (prompt-render plugin) reads the stored `isRawTemplate` to tell the kinds apart.
 * Nothing here renders: tenant text is only parsed, with a parser of its own (no shared cache).
 * Also what the prompt resources share: their slugs and the change notification.
 */
import { randomBytes } from 'node:crypto'
import Mustache from 'mustache'
import { CHANGE_CHANNELS } from '../../core/channels.js'
import { JSON_TOO_DEEP_MESSAGE, jsonTooDeep } from '../../core/json-depth.js'
import type { AdminDeps } from './request.js'

/** 1 MiB: far above any real prompt, small enough that a template is never a data store. */
export const MAX_TEMPLATE_BYTES = 1024 * 1024

/** The roles a chat template's message may have (the OpenAI chat roles). */
export const MESSAGE_ROLES: ReadonlySet<string> = new Set(['system', 'developer', 'user', 'assistant', 'tool', 'function'])

/** Mustache's default delimiters, passed explicitly so no global setting of the library applies. */
const TAGS: ['{{', '}}'] = ['{{', '}}']

export type TemplateCheck = { readonly ok: true; readonly isRawTemplate: boolean } | { readonly ok: false; readonly message: string }

/** Whether the text fits `MAX_TEMPLATE_BYTES` (a character count first: most templates need no byte count). */
export function templateFits(text: string): boolean {
  return text.length <= MAX_TEMPLATE_BYTES / 3 || Buffer.byteLength(text, 'utf8') <= MAX_TEMPLATE_BYTES
}

/**
 * Checks a prompt template and tells its kind.
 * @param raw `is_raw_template` as sent: `true` plain text, `false` chat, `undefined` by content
 * @returns the kind (`isRawTemplate`: a completion template), or the problem (`string: …`)
 */
export function checkPromptTemplate(text: string, raw: boolean | undefined): TemplateCheck {
  if (!templateFits(text)) return fail(`must be at most ${MAX_TEMPLATE_BYTES} bytes`)
  if (raw === true) return completion(text)
  const parsed = parseJsonArray(text)
  if (parsed === null) return raw === false ? fail('must be a JSON array of messages when is_raw_template is 0') : completion(text)
  if (jsonTooDeep(Buffer.from(text, 'utf8'), parsed)) return fail(JSON_TOO_DEEP_MESSAGE.replace('The JSON body', 'the chat template'))
  return checkMessages(parsed)
}

/** Checks a partial's template: plain text that Mustache parses. */
export function checkPartialTemplate(text: string): TemplateCheck {
  if (!templateFits(text)) return fail(`must be at most ${MAX_TEMPLATE_BYTES} bytes`)
  return completion(text)
}

/** The Mustache syntax error in `text`, or `null`. */
export function mustacheProblem(text: string): string | null {
  // No tag, no syntax to get wrong: a native scan spares the parser, which makes one token per
  // character of text before merging them (about 1 s and 100 MB for 1 MiB).
  if (text.indexOf(TAGS[0]) === -1) return null
  try {
    // A fresh writer per check: the library's default one caches every template it parsed, forever.
    new Mustache.Writer().parse(text, TAGS)
    return null
  } catch (error) {
    return `Mustache syntax error: ${error instanceof Error ? error.message : String(error)}`
  }
}

function fail(problem: string): TemplateCheck {
  return { ok: false, message: `string: ${problem}` }
}

function completion(text: string): TemplateCheck {
  const problem = mustacheProblem(text)
  return problem === null ? { ok: true, isRawTemplate: true } : fail(problem)
}

/** The template as a JSON array, or `null` when it is not one (a quick look at the first character first). */
function parseJsonArray(text: string): unknown[] | null {
  if (!/^\s*\[/.test(text)) return null
  try {
    const value: unknown = JSON.parse(text)
    return Array.isArray(value) ? value : null
  } catch {
    return null
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

function checkMessages(messages: readonly unknown[]): TemplateCheck {
  if (messages.length === 0) return fail('a chat template needs at least one message')
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i]
    const at = `messages[${i}]`
    if (!isRecord(message)) return fail(`${at}: must be an object with role and content`)
    const role = message.role
    if (typeof role !== 'string' || !MESSAGE_ROLES.has(role)) return fail(`${at}.role: must be one of ${[...MESSAGE_ROLES].join(', ')}`)
    const content = message.content
    if (typeof content === 'string') {
      const problem = mustacheProblem(content)
      if (problem !== null) return fail(`${at}.content: ${problem}`)
    } else if (Array.isArray(content)) {
      const problem = partsProblem(content, `${at}.content`)
      if (problem !== null) return fail(problem)
    } else if (!((content === null || content === undefined) && role === 'assistant')) {
      // Only an assistant message (one that carries tool calls) may come without content.
      return fail(`${at}.content: must be a string or an array of content parts`)
    }
  }
  return { ok: true, isRawTemplate: false }
}

/** Multi-part content: objects with a `type`; text parts carry a `text` string that Mustache parses. */
function partsProblem(parts: readonly unknown[], at: string): string | null {
  for (let j = 0; j < parts.length; j++) {
    const part = parts[j]
    const where = `${at}[${j}]`
    if (!isRecord(part) || typeof part.type !== 'string') return `${where}: must be an object with a type`
    if (part.type !== 'text') continue
    if (typeof part.text !== 'string') return `${where}.text: must be a string`
    const problem = mustacheProblem(part.text)
    if (problem !== null) return `${where}.text: ${problem}`
  }
  return null
}

/** `My support prompt!` → `my-support-prompt` (at most 20 characters), or `fallback`. */
function slugPart(name: string, fallback: string): string {
  const slug = name.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 20).replace(/-+$/, '')
  return slug.length > 0 ? slug : fallback
}

/** `<prefix><name>-<6 hex>`: prompts `pp-support-3b3a93`, partials and collections without a prefix. */
export function newSlug(name: string, fallback: string, prefix = ''): string {
  return `${prefix}${slugPart(name, fallback)}-${randomBytes(3).toString('hex')}`
}

/**
 * Tells every instance that a prompt, partial, label or collection of the workspace changed, so
 * compiled templates of it are dropped (the prompt-render plugin listens). Sent after the commit.
 */
export function publishPromptChange(deps: AdminDeps, workspaceId: string): void {
  deps.notifier.publish(CHANGE_CHANNELS.prompts, workspaceId)
}
