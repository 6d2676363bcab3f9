/**
 * Prompt template rendering (API.md §3), pure: compiled once per prompt version, rendered per
 * request with the caller's `variables`.
 *
 * - A chat template is a JSON array of messages; a completion template is plain text. The kind is
 *   the version's `isRawTemplate` (the Admin API sets it when it saves the template: anything that
 *   is not a JSON array is plain text). Mustache runs inside each message's `content` string and each
 *   `text` part of multi-part content, never over the JSON text, and the request body is built as
 *   objects and serialised afterwards: a value can never add, end or reshape a message.
 * - The renderer is mustache.js's `Writer` with a per-call `escape` that returns the value unchanged
 *   (no HTML escaping) and explicit `{{ }}` tags, so none of the library's global settings
 *   (`Mustache.escape`, `Mustache.tags`, the default writer's template cache) is read or changed.
 *   Mustache never renders a value as a template: a value holding `{{x}}`, JSON or `"}]` stays text.
 * - Variables are flat strings. Names are looked up in `variables` only (own properties, no dotted
 *   paths into values, no prototype members such as `constructor`); a section (`{{#x}}`) renders
 *   once when `x` is a non-empty string and `{{^x}}` when it is empty; `{{.}}` inside a section is
 *   the section's value.
 * - Every name the template uses (in sections and partials too, section names included) must be
 *   sent: a missing one is a 400 naming it, found from the parsed token tree before rendering. A
 *   value that is not a string is a 400 (API.md §3: JSON values are sent JSON-encoded).
 * - Partials (`{{>name}}`, `{{>name@latest}}`, `{{>name@3}}`) are resolved by the caller and
 *   handed in as texts; partials that include each other are refused at compile time, and so is a
 *   template whose expansion (partials repeated inside partials) passes `maxRenderedChars`.
 * - Size: the rendered text is bounded before rendering by the compiled template's character count
 *   plus, per use of a variable, that variable's length (`maxRenderedChars`), so neither a large
 *   value used many times nor nested partials can make a request build a string of unbounded size.
 */
import mustache from 'mustache'
import type { JsonObject } from '../../core/context.js'
import { ERRORS, gatewayError, GatewayError } from '../../core/errors.js'

/** Mustache tokens: `[type, value, start, end, children?, ...]`. */
type Token = readonly [string, string, number, number, ...unknown[]]
type Tokens = readonly Token[]

/** The version fields a request is built from (a `PromptVersionRecord` has them all). */
export interface TemplateSource {
  /** The template (`string`): a JSON array of chat messages, or plain text. */
  readonly template: string
  /** Treat the template as text even when it looks like JSON. */
  readonly isRawTemplate: boolean
  readonly model: string | null
  readonly parameters: Readonly<Record<string, unknown>>
  readonly tools: readonly unknown[] | null
  readonly toolChoice: unknown
  readonly functions: readonly unknown[] | null
}

export type TemplateKind = 'chat' | 'completion'

const TAGS: ['{{', '}}'] = ['{{', '}}']
const OPEN_TAG = '{{'
/** Per-call options: the library's global `escape` and `tags` are never consulted. */
const RENDER_OPTIONS = { tags: TAGS, escape: (value: string): string => value }
const MAX_NAME_IN_MESSAGE = 100
const MAX_NAMES_LISTED = 10

/**
 * The Mustache context of one render: names resolve to the caller's variables (own string
 * properties only), `.` to the section value it is pushed for. The root view is `''`, so `{{.}}`
 * outside a section renders nothing rather than `[object Object]`.
 */
class FlatContext extends mustache.Context {
  readonly #variables: Readonly<Record<string, string>>

  constructor(view: string, parent: FlatContext | undefined, variables: Readonly<Record<string, string>>) {
    super(view, parent)
    this.#variables = variables
  }

  override push(view: unknown): FlatContext {
    return new FlatContext(view as string, this, this.#variables)
  }

  override lookup(name: string): unknown {
    if (name === '.') return this.view
    return Object.hasOwn(this.#variables, name) ? this.#variables[name] : undefined
  }
}

/** One text Mustache renders. */
interface TextTemplate {
  readonly text: string
  readonly tokens: Tokens
}

/** A `text` part of multi-part content that holds tags; other parts are kept as they are. */
type PartPiece = { readonly fixed: unknown } | { readonly part: Readonly<Record<string, unknown>>; readonly template: TextTemplate }

type MessagePiece =
  | { readonly kind: 'fixed'; readonly message: unknown }
  | { readonly kind: 'text'; readonly message: Readonly<Record<string, unknown>>; readonly template: TextTemplate }
  | { readonly kind: 'parts'; readonly message: Readonly<Record<string, unknown>>; readonly parts: readonly PartPiece[] }

/** What a template (with its partials expanded) renders, counted once at compile time. */
interface Stats {
  /** Characters of template text. */
  chars: number
  /** Uses of `{{.}}` (each renders at most the longest value). */
  dots: number
  /** Value uses per name (`{{x}}`, `{{{x}}}`, `{{&x}}`). */
  readonly uses: Map<string, number>
  /** Every name used, section names included: all must be sent. */
  readonly names: Set<string>
}

function emptyStats(): Stats {
  return { chars: 0, dots: 0, uses: new Map(), names: new Set() }
}

function addStats(into: Stats, from: Stats, times: number): void {
  into.chars += from.chars * times
  into.dots += from.dots * times
  for (const [name, count] of from.uses) into.uses.set(name, (into.uses.get(name) ?? 0) + count * times)
  for (const name of from.names) into.names.add(name)
}

/**
 * The writer of one compiled template: mustache.js's own renderer, with `parse` replaced by
 * `parseTemplate` below and its own cache (the template's texts and its partials, also those
 * parsed at render time for an indented standalone partial), so nothing is shared between
 * templates and the library's default writer (and its unbounded cache) is never used. Every
 * caller passes the `{{ }}` tags.
 */
class PromptWriter extends mustache.Writer {
  readonly #parsed = new Map<string, Tokens>()

  override parse(template: string): Tokens {
    let tokens = this.#parsed.get(template)
    if (tokens === undefined) {
      tokens = parseTemplate(template)
      this.#parsed.set(template, tokens)
    }
    return tokens
  }
}

/** Parses `text` (throws the parser's syntax error). */
function parseTemplate(text: string): Tokens {
  const skeleton = text.length >= SKELETON_FROM ? skeletonOf(text) : null
  let tokens: Tokens | null = null
  if (skeleton !== null) {
    try {
      tokens = restorePieces(new mustache.Writer().parse(skeleton.text, TAGS) as Tokens, skeleton.pieces)
    } catch {
      // A syntax error: parse the real text for its message and positions.
    }
  }
  tokens ??= new mustache.Writer().parse(text, TAGS) as Tokens
  flattenTexts(tokens)
  return tokens
}

/**
 * mustache.js's parser makes one token per character of text before merging them (about 1.4 s and
 * 100 MB for 1 MiB), and a compile blocks the event loop. So a long text is parsed as a skeleton:
 * each stretch of text between a newline or tag and the next that holds a non-space character
 * becomes one placeholder character, which the parser treats exactly as it would the stretch (a
 * non-space character on that line: no standalone-tag stripping), and the stretches are put back
 * into the text tokens afterwards. Kept as they are: whitespace-only stretches (they decide which
 * lines are standalone), the text before a partial tag on its line (its length is the partial's
 * indentation), everything inside tags, and any text with a set-delimiter tag or the placeholder.
 */
const SKELETON_FROM = 2048
const PLACEHOLDER = '\uE000'
const NON_SPACE = /\S/
const SPACE = /\s/

function skeletonOf(text: string): { readonly text: string; readonly pieces: string[] } | null {
  if (text.includes('{{=') || text.includes(PLACEHOLDER)) return null
  const pieces: string[] = []
  let out = ''
  let position = 0
  while (position < text.length) {
    const open = text.indexOf(OPEN_TAG, position)
    const textEnd = open < 0 ? text.length : open
    let tagEnd = textEnd
    let beforePartial = false
    if (open >= 0) {
      let i = open + OPEN_TAG.length
      while (i < text.length && SPACE.test(text.charAt(i))) i++
      const type = text.charAt(i)
      beforePartial = type === '>'
      const close = type === '{' ? text.indexOf('}}}', i) : text.indexOf('}}', i)
      // An unclosed tag: the plain parse reports it.
      if (close < 0) return null
      tagEnd = close + (type === '{' ? 3 : 2)
    }
    const stretches = text.slice(position, textEnd).split('\n')
    for (let k = 0; k < stretches.length; k++) {
      const stretch = stretches[k] as string
      if (k > 0) out += '\n'
      if (stretch.length > 1 && NON_SPACE.test(stretch) && !(beforePartial && k === stretches.length - 1)) {
        pieces.push(stretch)
        out += PLACEHOLDER
      } else {
        out += stretch
      }
    }
    out += text.slice(textEnd, tagEnd)
    position = tagEnd
  }
  return { text: out, pieces }
}

/** Puts the stretches back, in document order; throws when they do not all fit. */
function restorePieces(tokens: Tokens, pieces: readonly string[]): Tokens {
  let next = 0
  const walk = (list: Tokens): void => {
    for (const token of list) {
      if (token[0] === 'text' && token[1].includes(PLACEHOLDER)) {
        const parts = token[1].split(PLACEHOLDER)
        let value = parts[0] as string
        for (let i = 1; i < parts.length; i++) {
          if (next >= pieces.length) throw new Error('skeleton mismatch')
          value += (pieces[next++] as string) + (parts[i] as string)
        }
        ;(token as unknown as unknown[])[1] = value
      } else if (token[0] === '#' || token[0] === '^') {
        walk(token[4] as Tokens)
      }
    }
  }
  walk(tokens)
  if (next !== pieces.length) throw new Error('skeleton mismatch')
  return tokens
}

/**
 * Parses `text` with the template's writer; a syntax error becomes a 400 naming where it is.
 */
function parseText(writer: PromptWriter, text: string, where: string): Tokens | GatewayError {
  try {
    return writer.parse(text)
  } catch (error) {
    return gatewayError(ERRORS.GW_PROMPT_TEMPLATE_INVALID, `${where}: ${(error as Error).message}`)
  }
}

/**
 * Flattens the text tokens: the parser builds each one a character at a time (`+=`), leaving a
 * string of as many nested pieces as characters, which every render would copy piece by piece when
 * the request is serialised (10 µs instead of 2 for the bench's 2 KB message).
 */
function flattenTexts(tokens: Tokens): void {
  for (const token of tokens) {
    if (token[0] === 'text') (token as unknown as unknown[])[1] = flatString(token[1])
    else if (token[0] === '#' || token[0] === '^') flattenTexts(token[4] as Tokens)
  }
}

/** A copy of `text` in one piece (a JSON round trip always builds a flat string). */
function flatString(text: string): string {
  return JSON.parse(JSON.stringify(text)) as string
}

function shortName(name: string): string {
  return name.length <= MAX_NAME_IN_MESSAGE ? name : `${name.slice(0, MAX_NAME_IN_MESSAGE)}…`
}

/**
 * The partial names `text` uses directly (`{{>name}}`), in order of first use, or a syntax error.
 * The caller resolves these (and theirs, transitively) before `compileTemplate`.
 */
export function partialNamesIn(text: string, where = 'partial'): string[] | GatewayError {
  if (!text.includes(OPEN_TAG)) return []
  const tokens = parseText(new PromptWriter(), text, where)
  if (tokens instanceof GatewayError) return tokens
  const names = new Set<string>()
  collectPartials(tokens, names)
  return [...names]
}

function collectPartials(tokens: Tokens, into: Set<string>): void {
  for (const token of tokens) {
    if (token[0] === '>') into.add(token[1])
    else if (token[0] === '#' || token[0] === '^') collectPartials(token[4] as Tokens, into)
  }
}

/** The texts of a template that Mustache renders (message contents and text parts, or the whole text). */
export function templateTexts(source: Pick<TemplateSource, 'template' | 'isRawTemplate'>): string[] | GatewayError {
  const messages = chatMessagesOf(source)
  if (messages instanceof GatewayError) return messages
  if (messages === null) return [source.template]
  const texts: string[] = []
  for (const message of messages) {
    const content = (message as Record<string, unknown>).content
    if (typeof content === 'string') texts.push(content)
    else if (Array.isArray(content)) for (const part of content) if (isTextPart(part)) texts.push(part.text)
  }
  return texts
}

/** The messages of a chat template, `null` for a completion template, or why the messages are invalid. */
function chatMessagesOf(source: Pick<TemplateSource, 'template' | 'isRawTemplate'>): unknown[] | null | GatewayError {
  if (source.isRawTemplate) return null
  let parsed: unknown
  try {
    parsed = JSON.parse(source.template)
  } catch {
    parsed = null
  }
  // The Admin API saves every template that is not a JSON array as raw text: one that is not must
  // not be sent to /completions as if it were.
  if (!Array.isArray(parsed)) return gatewayError(ERRORS.GW_PROMPT_TEMPLATE_INVALID, 'The chat template is not a JSON array of messages')
  for (let i = 0; i < parsed.length; i++) {
    const message: unknown = parsed[i]
    if (message === null || typeof message !== 'object' || Array.isArray(message) || typeof (message as Record<string, unknown>).role !== 'string') {
      return gatewayError(ERRORS.GW_PROMPT_TEMPLATE_INVALID, `The chat template's message ${i} is not an object with a "role"`)
    }
    const content = (message as Record<string, unknown>).content
    if (content !== undefined && content !== null && typeof content !== 'string' && !Array.isArray(content)) {
      return gatewayError(ERRORS.GW_PROMPT_TEMPLATE_INVALID, `The chat template's message ${i} has a "content" that is neither text nor a list of parts`)
    }
  }
  return parsed
}

function isTextPart(part: unknown): part is { type: 'text'; text: string } {
  return part !== null && typeof part === 'object' && (part as Record<string, unknown>).type === 'text' && typeof (part as Record<string, unknown>).text === 'string'
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value)
    for (const key of Object.keys(value)) deepFreeze((value as Record<string, unknown>)[key])
  }
  return value
}

/** A saved value copied into every request: cloned and frozen, so no request can change the cached one. */
function frozenCopy<T>(value: T): T {
  return value === null || typeof value !== 'object' ? value : deepFreeze(structuredClone(value))
}

/**
 * A prompt version ready to render: its texts parsed, its partials attached, the names it needs
 * and the size it may render to counted. Immutable; shared by every request for that version.
 */
export class PromptTemplate {
  readonly kind: TemplateKind
  /** Every variable name the template uses (sections and partials included), sorted. */
  readonly names: readonly string[]
  readonly #where: string
  readonly #writer: PromptWriter
  readonly #partials: Record<string, string>
  readonly #messages: readonly MessagePiece[]
  readonly #completion: TextTemplate | string | null
  readonly #chars: number
  readonly #dots: number
  readonly #useNames: readonly string[]
  readonly #useCounts: readonly number[]
  readonly #model: string | null
  readonly #parameters: Readonly<Record<string, unknown>>
  readonly #tools: readonly unknown[] | null
  readonly #toolChoice: unknown
  readonly #functions: readonly unknown[] | null

  private constructor(init: {
    kind: TemplateKind
    where: string
    writer: PromptWriter
    partials: Record<string, string>
    messages: readonly MessagePiece[]
    completion: TextTemplate | string | null
    stats: Stats
    source: TemplateSource
  }) {
    this.kind = init.kind
    this.#where = init.where
    this.#writer = init.writer
    this.#partials = init.partials
    this.#messages = init.messages
    this.#completion = init.completion
    this.#chars = init.stats.chars
    this.#dots = init.stats.dots
    this.names = [...init.stats.names].sort()
    this.#useNames = [...init.stats.uses.keys()]
    this.#useCounts = [...init.stats.uses.values()]
    const source = init.source
    this.#model = source.model
    this.#parameters = frozenCopy(source.parameters ?? {})
    this.#tools = frozenCopy(source.tools)
    this.#toolChoice = frozenCopy(source.toolChoice)
    this.#functions = frozenCopy(source.functions)
  }

  /**
   * Compiles a version. `partials` maps each name used as `{{>name}}` (directly or inside other
   * partials) to its text; a name it lacks is a 400 `GW_PROMPT_PARTIAL_NOT_FOUND`.
   * @param where how messages name the template, e.g. `Prompt pp-x version 2`
   * @param maxRenderedChars the most characters the template may expand to before any value
   */
  static compile(source: TemplateSource, partials: ReadonlyMap<string, string>, where: string, maxRenderedChars: number): PromptTemplate | GatewayError {
    const writer = new PromptWriter()
    const partialTexts: Record<string, string> = Object.create(null) as Record<string, string>
    const partialStats = new Map<string, Stats | GatewayError>()
    const inProgress = new Set<string>()

    // Stats of `tokens`, partials expanded (memoised per partial; a partial met again while its own
    // expansion is running is a cycle, which Mustache would follow until the stack overflows).
    const statsOf = (tokens: Tokens, into: Stats): GatewayError | undefined => {
      for (const token of tokens) {
        const type = token[0]
        const value = token[1]
        if (type === 'text') into.chars += value.length
        else if (type === 'name' || type === '&') {
          if (value === '.') into.dots += 1
          else {
            into.names.add(value)
            into.uses.set(value, (into.uses.get(value) ?? 0) + 1)
          }
        } else if (type === '#' || type === '^') {
          if (value !== '.') into.names.add(value)
          const failed = statsOf(token[4] as Tokens, into)
          if (failed !== undefined) return failed
        } else if (type === '>') {
          const expanded = partialStatsOf(value)
          if (expanded instanceof GatewayError) return expanded
          addStats(into, expanded, 1)
        }
      }
      return undefined
    }
    const partialStatsOf = (name: string): Stats | GatewayError => {
      const known = partialStats.get(name)
      if (known !== undefined) return known
      if (inProgress.has(name)) {
        return gatewayError(ERRORS.GW_PROMPT_TEMPLATE_INVALID, `${where}: the partial "${shortName(name)}" includes itself (directly or through other partials)`)
      }
      const text = partials.get(name)
      if (text === undefined) {
        return gatewayError(ERRORS.GW_PROMPT_PARTIAL_NOT_FOUND, `${where} uses the partial "${shortName(name)}", which does not exist in its workspace`, { param: 'string' })
      }
      inProgress.add(name)
      let result: Stats | GatewayError
      const tokens = parseText(writer, text, `${where}, partial "${shortName(name)}"`)
      if (tokens instanceof GatewayError) result = tokens
      else {
        const stats = emptyStats()
        result = statsOf(tokens, stats) ?? stats
      }
      inProgress.delete(name)
      partialStats.set(name, result)
      if (!(result instanceof GatewayError)) partialTexts[name] = text
      return result
    }

    const stats = emptyStats()
    const textTemplate = (text: string, label: string): TextTemplate | string | GatewayError => {
      if (!text.includes(OPEN_TAG)) {
        stats.chars += text.length
        return text
      }
      const tokens = parseText(writer, text, `${where}, ${label}`)
      if (tokens instanceof GatewayError) return tokens
      const failed = statsOf(tokens, stats)
      return failed ?? { text, tokens }
    }

    const messages = chatMessagesOf(source)
    if (messages instanceof GatewayError) return gatewayError(ERRORS.GW_PROMPT_TEMPLATE_INVALID, `${where}: ${messages.message}`)
    let kind: TemplateKind
    const pieces: MessagePiece[] = []
    let completion: TextTemplate | string | null = null
    if (messages === null) {
      kind = 'completion'
      const compiled = textTemplate(source.template, 'template')
      if (compiled instanceof GatewayError) return compiled
      completion = compiled
    } else {
      kind = 'chat'
      for (let i = 0; i < messages.length; i++) {
        const message = messages[i] as Record<string, unknown>
        const content = message.content
        if (typeof content === 'string') {
          const compiled = textTemplate(content, `message ${i}`)
          if (compiled instanceof GatewayError) return compiled
          pieces.push(typeof compiled === 'string' ? { kind: 'fixed', message: deepFreeze(message) } : { kind: 'text', message: deepFreeze(message), template: compiled })
        } else if (Array.isArray(content)) {
          const parts: PartPiece[] = []
          let templated = false
          for (let j = 0; j < content.length; j++) {
            const part: unknown = content[j]
            if (!isTextPart(part)) {
              parts.push({ fixed: deepFreeze(part) })
              continue
            }
            const compiled = textTemplate(part.text, `message ${i}, part ${j}`)
            if (compiled instanceof GatewayError) return compiled
            if (typeof compiled === 'string') parts.push({ fixed: deepFreeze(part) })
            else {
              templated = true
              parts.push({ part: deepFreeze(part), template: compiled })
            }
          }
          pieces.push(templated ? { kind: 'parts', message: deepFreeze(message), parts } : { kind: 'fixed', message: deepFreeze(message) })
        } else {
          pieces.push({ kind: 'fixed', message: deepFreeze(message) })
        }
      }
    }
    if (stats.chars > maxRenderedChars) {
      return gatewayError(ERRORS.GW_PROMPT_TEMPLATE_INVALID, `${where} expands to more than ${maxRenderedChars} characters before any variable is filled in`)
    }
    return new PromptTemplate({ kind, where, writer, partials: partialTexts, messages: pieces, completion, stats, source })
  }

  /**
   * The complete request body for `body` (the client's: `variables`, `stream`, overrides): the
   * saved parameters, then `model`, `tools`, `tool_choice`, `functions`, then the rendered
   * `messages` (chat) or `prompt` (completion), then every root field of `body` except `variables`
   * and `stream`, which win; `stream: true` only when `body.stream` is exactly `true`.
   */
  buildRequest(body: JsonObject, maxRenderedChars: number): JsonObject | GatewayError {
    const variables = this.checkVariables(body.variables, maxRenderedChars)
    if (variables instanceof GatewayError) return variables
    const out: JsonObject = {}
    const parameters = this.#parameters
    for (const key in parameters) {
      if (key !== 'stream' && key !== '__proto__') out[key] = parameters[key]
    }
    if (this.#model !== null) out.model = this.#model
    if (this.#tools !== null) out.tools = this.#tools
    if (this.#toolChoice !== null && this.#toolChoice !== undefined) out.tool_choice = this.#toolChoice
    if (this.#functions !== null) out.functions = this.#functions
    if (this.kind === 'chat') out.messages = this.#renderMessages(variables)
    else out.prompt = this.#renderCompletion(variables)
    for (const key in body) {
      if (key !== 'variables' && key !== 'stream' && key !== '__proto__') out[key] = body[key]
    }
    if (body.stream === true) out.stream = true
    return out
  }

  /**
   * `variables` as sent, once it is an object of strings holding every name the template uses and
   * renders to at most `maxRenderedChars` characters; else the 400 to answer.
   */
  checkVariables(raw: unknown, maxRenderedChars: number): Readonly<Record<string, string>> | GatewayError {
    if (raw !== undefined && (raw === null || typeof raw !== 'object' || Array.isArray(raw))) {
      return gatewayError(ERRORS.GW_REQ_INVALID, 'variables must be a JSON object of strings', { param: 'variables' })
    }
    const variables = (raw ?? {}) as Record<string, unknown>
    let longest = 0
    for (const name in variables) {
      const value = variables[name]
      if (typeof value !== 'string') {
        return gatewayError(
          ERRORS.GW_REQ_INVALID,
          `variables.${shortName(name)} must be a string (send a JSON value JSON-encoded, e.g. "{\\"a\\":1}")`,
          { param: `variables.${shortName(name)}` },
        )
      }
      if (value.length > longest) longest = value.length
    }
    let missing: string[] | null = null
    for (const name of this.names) {
      if (!Object.hasOwn(variables, name)) (missing ??= []).push(name)
    }
    if (missing !== null) {
      const listed = missing.slice(0, MAX_NAMES_LISTED).map((name) => `"${shortName(name)}"`).join(', ')
      const more = missing.length > MAX_NAMES_LISTED ? ` and ${missing.length - MAX_NAMES_LISTED} more` : ''
      return gatewayError(
        ERRORS.GW_PROMPT_VARIABLE_MISSING,
        `Missing variable${missing.length === 1 ? '' : 's'} ${listed}${more}: ${this.#where} uses ${missing.length === 1 ? 'it' : 'them'}; send ${missing.length === 1 ? 'it' : 'them'} in "variables" (an empty string for an empty section)`,
        { param: `variables.${shortName(missing[0] as string)}` },
      )
    }
    let chars = this.#chars + this.#dots * longest
    const names = this.#useNames
    const counts = this.#useCounts
    for (let i = 0; i < names.length; i++) chars += (counts[i] as number) * (variables[names[i] as string] as string).length
    if (chars > maxRenderedChars) {
      return gatewayError(ERRORS.GW_REQ_BODY_TOO_LARGE, `The rendered prompt would be longer than ${maxRenderedChars} characters`, { param: 'variables' })
    }
    return variables as Readonly<Record<string, string>>
  }

  #renderText(template: TextTemplate, context: FlatContext): string {
    return this.#writer.renderTokens(template.tokens as never, context, this.#partials, template.text, RENDER_OPTIONS)
  }

  #renderCompletion(variables: Readonly<Record<string, string>>): string {
    const completion = this.#completion as TextTemplate | string
    return typeof completion === 'string' ? completion : this.#renderText(completion, new FlatContext('', undefined, variables))
  }

  #renderMessages(variables: Readonly<Record<string, string>>): unknown[] {
    const pieces = this.#messages
    const out = new Array<unknown>(pieces.length)
    let context: FlatContext | null = null
    for (let i = 0; i < pieces.length; i++) {
      const piece = pieces[i] as MessagePiece
      if (piece.kind === 'fixed') {
        out[i] = piece.message
        continue
      }
      context ??= new FlatContext('', undefined, variables)
      if (piece.kind === 'text') {
        out[i] = { ...piece.message, content: this.#renderText(piece.template, context) }
        continue
      }
      const parts = piece.parts
      const content = new Array<unknown>(parts.length)
      for (let j = 0; j < parts.length; j++) {
        const part = parts[j] as PartPiece
        content[j] = 'fixed' in part ? part.fixed : { ...part.part, text: this.#renderText(part.template, context) }
      }
      out[i] = { ...piece.message, content }
    }
    return out
  }
}
