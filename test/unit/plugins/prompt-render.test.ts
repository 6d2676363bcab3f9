/**
 * The prompt renderer (plugins/prompt-render/render.ts): chat and completion templates, sections,
 * partials, required variables, hyperparameter order, size bounds, and that the library's global
 * settings are never read or changed.
 */
import Mustache from 'mustache'
import { describe, expect, it } from 'vitest'
import { GatewayError } from '../../../core/errors.js'
import { partialNamesIn, PromptTemplate, templateTexts, type TemplateSource } from '../../../plugins/prompt-render/render.js'

const MAX = 1_000_000

function source(template: unknown, overrides: Partial<TemplateSource> = {}): TemplateSource {
  return {
    template: typeof template === 'string' ? template : JSON.stringify(template),
    isRawTemplate: typeof template === 'string',
    model: 'gpt-4o-mini',
    parameters: {},
    tools: null,
    toolChoice: null,
    functions: null,
    ...overrides,
  }
}

function compile(template: unknown, partials: Record<string, string> = {}, overrides: Partial<TemplateSource> = {}, max = MAX): PromptTemplate {
  const compiled = PromptTemplate.compile(source(template, overrides), new Map(Object.entries(partials)), 'Prompt pp-test version 1', max)
  if (compiled instanceof GatewayError) throw compiled
  return compiled
}

function compileError(template: unknown, partials: Record<string, string> = {}, max = MAX): GatewayError {
  const compiled = PromptTemplate.compile(source(template), new Map(Object.entries(partials)), 'Prompt pp-test version 1', max)
  expect(compiled).toBeInstanceOf(GatewayError)
  return compiled as GatewayError
}

function build(template: PromptTemplate, body: Record<string, unknown>, max = MAX): Record<string, any> {
  const out = template.buildRequest(body, max)
  if (out instanceof GatewayError) throw out
  return out
}

function buildError(template: PromptTemplate, body: Record<string, unknown>, max = MAX): GatewayError {
  const out = template.buildRequest(body, max)
  expect(out).toBeInstanceOf(GatewayError)
  return out as GatewayError
}

describe('chat templates', () => {
  const chat = [
    { role: 'system', content: 'You help {{company}} customers.', name: 'helper' },
    {
      role: 'user',
      content: [
        { type: 'text', text: 'Question: {{question}}' },
        { type: 'image_url', image_url: { url: 'https://example.com/{{question}}.png' } },
      ],
    },
    { role: 'assistant', content: 'No variables here.' },
  ]

  it('renders each content string and text part, keeping every other field and part as saved', () => {
    const template = compile(chat)
    expect(template.kind).toBe('chat')
    expect(template.names).toEqual(['company', 'question'])
    const out = build(template, { variables: { company: 'Acme', question: 'Where is my order?' } })
    expect(out.messages).toEqual([
      { role: 'system', content: 'You help Acme customers.', name: 'helper' },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'Question: Where is my order?' },
          // Only text parts are templates: the URL keeps its braces.
          { type: 'image_url', image_url: { url: 'https://example.com/{{question}}.png' } },
        ],
      },
      { role: 'assistant', content: 'No variables here.' },
    ])
    expect(out.prompt).toBeUndefined()
  })

  it('refuses a chat template (isRawTemplate false) that is not an array of messages with a role', () => {
    const notJson = PromptTemplate.compile({ ...source('x'), template: 'not json', isRawTemplate: false }, new Map(), 'P', MAX)
    expect((notJson as GatewayError).code).toBe('GW_PROMPT_TEMPLATE_INVALID')
    const notArray = PromptTemplate.compile({ ...source('x'), template: '{"role":"user"}', isRawTemplate: false }, new Map(), 'P', MAX)
    expect((notArray as GatewayError).code).toBe('GW_PROMPT_TEMPLATE_INVALID')
    expect(compileError([{ content: 'no role' }]).message).toContain('message 0')
    expect(compileError([{ role: 'user', content: 5 }]).message).toContain('content')
  })

  it('names the message of a Mustache syntax error', () => {
    const error = compileError([{ role: 'user', content: 'fine' }, { role: 'user', content: '{{#open}} never closed' }])
    expect(error.code).toBe('GW_PROMPT_TEMPLATE_INVALID')
    expect(error.message).toContain('message 1')
  })

  it('lists the texts Mustache renders and the partials they use', () => {
    expect(templateTexts(source(chat))).toEqual(['You help {{company}} customers.', 'Question: {{question}}', 'No variables here.'])
    expect(templateTexts(source('plain {{x}}'))).toEqual(['plain {{x}}'])
    expect(partialNamesIn('a {{>one}} {{#s}}{{>two@latest}}{{/s}} {{>one}}')).toEqual(['one', 'two@latest'])
    expect(partialNamesIn('no tags')).toEqual([])
  })
})

describe('completion templates', () => {
  it('renders the whole text into prompt', () => {
    const template = compile('Write a haiku about {{topic}}.\n')
    expect(template.kind).toBe('completion')
    const out = build(template, { variables: { topic: 'rain' } })
    expect(out.prompt).toBe('Write a haiku about rain.\n')
    expect(out.messages).toBeUndefined()
  })

  it('treats a JSON-looking text saved as raw as text', () => {
    const template = compile('[{"role":"user","content":"{{x}}"}]', {}, { isRawTemplate: true })
    expect(template.kind).toBe('completion')
    expect(build(template, { variables: { x: 'y' } }).prompt).toBe('[{"role":"user","content":"y"}]')
  })
})

describe('Mustache features', () => {
  it('renders without HTML escaping', () => {
    const template = compile('{{a}} {{{a}}} {{&a}}')
    expect(build(template, { variables: { a: `<b>&"'/=` } }).prompt).toBe(`<b>&"'/= <b>&"'/= <b>&"'/=`)
  })

  it('renders a section once for a non-empty value, an inverted section for an empty one, {{.}} as the section value', () => {
    const template = compile('{{#ctx}}Context: {{.}}. {{/ctx}}{{^ctx}}No context. {{/ctx}}Q: {{q}}')
    expect(build(template, { variables: { ctx: 'docs', q: '1' } }).prompt).toBe('Context: docs. Q: 1')
    expect(build(template, { variables: { ctx: '', q: '2' } }).prompt).toBe('No context. Q: 2')
  })

  it('renders {{.}} outside a section as nothing', () => {
    expect(build(compile('[{{.}}]'), {}).prompt).toBe('[]')
  })

  it('resolves names in variables only: no dotted paths into values, no prototype members', () => {
    const template = compile('{{a.length}}|{{constructor}}|{{toString}}')
    expect(template.names).toEqual(['a.length', 'constructor', 'toString'])
    const missing = buildError(template, { variables: { a: 'abc' } })
    expect(missing.code).toBe('GW_PROMPT_VARIABLE_MISSING')
    const out = build(template, { variables: { 'a.length': 'L', constructor: 'C', toString: 'T' } })
    expect(out.prompt).toBe('L|C|T')
  })

  it('renders partials, nested ones included, inside sections too', () => {
    const template = compile('To: {{>greeting}} {{#vip}}{{>vip-note@latest}}{{/vip}}', {
      greeting: 'Hello {{name}}{{>punctuation}}',
      punctuation: '!',
      'vip-note@latest': '(VIP {{name}})',
    })
    expect(template.names).toEqual(['name', 'vip'])
    expect(build(template, { variables: { name: 'Ada', vip: 'yes' } }).prompt).toBe('To: Hello Ada! (VIP Ada)')
    expect(build(template, { variables: { name: 'Ada', vip: '' } }).prompt).toBe('To: Hello Ada! ')
  })

  it('keeps set-delimiter tags of a template working without touching the library globals', () => {
    const template = compile('{{=<% %>=}}<% a %> and {{literal}}')
    expect(build(template, { variables: { a: 'x' } }).prompt).toBe('x and {{literal}}')
  })

  it('never changes the library globals: Mustache.render still escapes HTML with {{ }} tags', () => {
    const escape = Mustache.escape
    const tags = [...Mustache.tags]
    build(compile('{{a}}'), { variables: { a: '<i>' } })
    expect(Mustache.escape).toBe(escape)
    expect(Mustache.tags).toEqual(tags)
    expect(Mustache.render('{{a}}', { a: '<i>' })).toBe('&lt;i&gt;')
  })
})

describe('variables', () => {
  const template = compile([
    { role: 'system', content: '{{#formal}}Dear {{title}} {{/formal}}{{name}}' },
    { role: 'user', content: '{{>footer}}' },
  ], { footer: 'Sent by {{sender}}' })

  it('needs every name the template uses: section names, names inside sections and partials', () => {
    expect(template.names).toEqual(['formal', 'name', 'sender', 'title'])
    const error = buildError(template, { variables: { name: 'Ada', formal: '' } })
    expect(error.code).toBe('GW_PROMPT_VARIABLE_MISSING')
    expect(error.status).toBe(400)
    expect(error.message).toContain('"sender"')
    expect(error.message).toContain('"title"')
    expect(error.param).toBe('variables.sender')
    const one = buildError(template, { variables: { name: 'Ada', formal: '', title: 'Dr' } })
    expect(one.message).toMatch(/^Missing variable "sender"/)
  })

  it('refuses values that are not strings, and variables that are not an object', () => {
    const all = { formal: '', title: '', name: 'x', sender: 'y' }
    for (const value of [1, true, null, { a: 1 }, ['a']]) {
      const error = buildError(template, { variables: { ...all, name: value } })
      expect(error.code).toBe('GW_REQ_INVALID')
      expect(error.param).toBe('variables.name')
    }
    // An unused variable must be a string too (API.md §3: JSON values are sent JSON-encoded).
    expect(buildError(template, { variables: { ...all, extra: 3 } }).param).toBe('variables.extra')
    for (const variables of [null, 'x', ['a'], 5]) expect(buildError(template, { variables }).param).toBe('variables')
  })

  it('treats absent variables as none', () => {
    expect(build(compile('static'), {}).prompt).toBe('static')
    expect(buildError(compile('{{x}}'), {}).code).toBe('GW_PROMPT_VARIABLE_MISSING')
  })
})

describe('partials', () => {
  it('names a missing partial (400)', () => {
    const error = compileError('{{>header}} {{>missing-one}}', { header: 'h' })
    expect(error.code).toBe('GW_PROMPT_PARTIAL_NOT_FOUND')
    expect(error.status).toBe(400)
    expect(error.message).toContain('"missing-one"')
  })

  it('refuses partials that include each other, directly or not', () => {
    expect(compileError('{{>a}}', { a: 'x{{>a}}' }).message).toContain('includes itself')
    expect(compileError('{{>a}}', { a: '{{>b}}', b: '{{#s}}{{>a}}{{/s}}' }).message).toContain('includes itself')
  })

  it('refuses a template whose partials expand past the limit (partials repeated inside partials)', () => {
    const partials: Record<string, string> = { p0: 'x'.repeat(10) }
    for (let i = 1; i <= 30; i++) partials[`p${i}`] = `{{>p${i - 1}}}{{>p${i - 1}}}`
    const error = compileError('{{>p30}}', partials)
    expect(error.code).toBe('GW_PROMPT_TEMPLATE_INVALID')
    expect(error.message).toContain('expands to more than')
  })
})

describe('size bound', () => {
  it('refuses a render whose values would pass maxRenderedChars, before rendering (413)', () => {
    const template = compile('{{v}}'.repeat(1000))
    const value = 'x'.repeat(2000)
    const error = buildError(template, { variables: { v: value } }, 1_000_000)
    expect(error.code).toBe('GW_REQ_BODY_TOO_LARGE')
    expect(error.status).toBe(413)
    expect(build(template, { variables: { v: 'x'.repeat(999) } }, 1_000_000).prompt).toHaveLength(999_000)
  })

  it('counts uses inside partials and {{.}} with the longest value', () => {
    const template = compile('{{>twice}}{{#s}}{{.}}{{/s}}', { twice: '{{v}}{{v}}' })
    expect(buildError(template, { variables: { v: 'x'.repeat(40), s: 'y'.repeat(30) } }, 100).code).toBe('GW_REQ_BODY_TOO_LARGE')
    expect(build(template, { variables: { v: 'x'.repeat(30), s: 'y'.repeat(30) } }, 100).prompt).toHaveLength(90)
  })
})

describe('request body', () => {
  const saved: Partial<TemplateSource> = {
    model: 'gpt-4o',
    parameters: { temperature: 0.2, max_tokens: 100, stream: true, top_p: 0.9 },
    tools: [{ type: 'function', function: { name: 'lookup', parameters: {} } }],
    toolChoice: 'auto',
    functions: null,
  }
  const template = compile([{ role: 'user', content: 'Hi {{name}}' }], {}, saved)

  it('sends the saved model, parameters and tools, never variables, and stream only when the body says true', () => {
    const out = build(template, { variables: { name: 'Ada' } })
    expect(out).toEqual({
      temperature: 0.2,
      max_tokens: 100,
      top_p: 0.9,
      model: 'gpt-4o',
      tools: [{ type: 'function', function: { name: 'lookup', parameters: {} } }],
      tool_choice: 'auto',
      messages: [{ role: 'user', content: 'Hi Ada' }],
    })
    expect(build(template, { variables: { name: 'Ada' }, stream: true }).stream).toBe(true)
    for (const stream of [false, 'true', 1, null]) expect(build(template, { variables: { name: 'Ada' }, stream })).not.toHaveProperty('stream')
  })

  it('lets every root field of the body override the saved one', () => {
    const out = build(template, {
      variables: { name: 'Ada' },
      temperature: 1,
      max_tokens: 5,
      model: 'gpt-4o-mini',
      tool_choice: 'none',
      response_format: { type: 'json_object' },
      stop: ['\n'],
      messages: [{ role: 'user', content: 'replaced' }],
    })
    expect(out).toMatchObject({
      temperature: 1,
      max_tokens: 5,
      top_p: 0.9,
      model: 'gpt-4o-mini',
      tool_choice: 'none',
      response_format: { type: 'json_object' },
      stop: ['\n'],
      messages: [{ role: 'user', content: 'replaced' }],
    })
    expect(out).not.toHaveProperty('variables')
  })

  it('keeps the saved values out of reach of one request', () => {
    const out = build(template, { variables: { name: 'Ada' } })
    expect(() => {
      ;(out.tools as Array<Record<string, unknown>>)[0]!.type = 'changed'
    }).toThrow(TypeError)
    expect(build(template, { variables: { name: 'Ada' } }).tools[0].type).toBe('function')
  })
})

describe('long texts (parsed as a skeleton)', () => {
  /** A deterministic pseudo-random generator, so a failure is reproducible from its seed. */
  function random(seed: number): () => number {
    let state = seed
    return () => {
      state = (state * 1103515245 + 12345) % 2147483648
      return state / 2147483648
    }
  }

  /** A long template mixing text, blank and standalone lines, CRLF, every tag kind and indented partials. */
  function generated(seed: number): string {
    const next = random(seed)
    const pick = <T,>(items: readonly T[]): T => items[Math.floor(next() * items.length)] as T
    const words = ['alpha', 'beta', '  ', ' ', '\t', 'x', '}', '"}]', 'gamma delta', '...', '  indented']
    const inline = ['{{a}}', '{{{b}}}', '{{& a}}', '{{! note }}', '{{#s}}in {{a}}{{/s}}', '{{^e}}empty{{/e}}', '{{#s}}[{{.}}]{{/s}}']
    const lines: string[] = []
    const openSections: string[] = []
    let length = 0
    while (length < 6000) {
      const kind = next()
      let line: string
      if (kind < 0.35) line = Array.from({ length: 1 + Math.floor(next() * 8) }, () => pick(words)).join('')
      else if (kind < 0.6) line = `${pick(words)}${pick(inline)}${pick(words)}${pick(inline)}${pick(words)}`
      else if (kind < 0.7) {
        // A standalone section line: close the innermost open one, or open one.
        const pad = pick(['', '  '])
        if (openSections.length > 0 && next() < 0.5) line = `${pad}{{/${openSections.pop() as string}}}${pick(['', ' '])}`
        else {
          const [sigil, name] = pick([['#', 's'], ['^', 'e'], ['#', 'e'], ['^', 's']] as const)
          openSections.push(name)
          line = `${pad}{{${sigil}${name}}}${pick(['', ' '])}`
        }
      } else if (kind < 0.8) line = `${pick(['', '  ', '\t', 'lead '])}{{>p}}${pick(['', ' tail', '  '])}`
      else if (kind < 0.9) line = pick(['', '   ', '\r', 'line\r'])
      else line = `{{! a comment\nover lines }}${pick(words)}`
      lines.push(line)
      length += line.length + 1
    }
    while (openSections.length > 0) lines.push(`{{/${openSections.pop() as string}}}`)
    return lines.join('\n')
  }

  it('renders exactly as mustache.js renders the text itself', () => {
    const partials = { p: 'partial line one {{a}}\n  partial line two\n' }
    let compared = 0
    for (let seed = 1; seed <= 40; seed++) {
      const text = generated(seed)
      let expected: string
      try {
        expected = new Mustache.Writer().render(text, { a: 'A', b: '<B>', s: 'S', e: '' }, partials, { escape: (value: string) => value })
      } catch (error) {
        throw new Error(`seed ${seed}: ${(error as Error).message}`)
      }
      const template = compile(text, partials)
      expect(build(template, { variables: { a: 'A', b: '<B>', s: 'S', e: '' } }).prompt, `seed ${seed}`).toBe(expected)
      compared++
    }
    expect(compared).toBeGreaterThan(20)
  })

  it('reports a syntax error of a long text with the parser’s own message', () => {
    const text = `${'plain text line\n'.repeat(300)}{{#open}} never closed`
    let message = ''
    try {
      new Mustache.Writer().parse(text, ['{{', '}}'])
    } catch (error) {
      message = (error as Error).message
    }
    expect(message).not.toBe('')
    expect(compileError(text).message).toContain(message)
  })
})
