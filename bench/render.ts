/**
 * Microbenchmark of the prompt render step (issue 14, Speed): what prompt-render's onAccess does per
 * request once the version is compiled and cached: check the variables, render the messages, build
 * the request body, serialise it and copy it into a Buffer (`ctx.rawBody`). The template is a 2 KB
 * chat template with 5 variables (a system message with 3, a user message with 2), as the
 * `gateway-prompt` bench scenario uses (bench/prompt-template.ts).
 *
 *   npm run build && node dist/bench/render.js
 *
 * Batches of `BENCH_RENDER_BATCH` renders (default 1000) are timed after a warm-up; the report is
 * the median (and p10/p90) of the per-render time over `BENCH_RENDER_BATCHES` batches (default
 * 200), for the whole step and for its parts. Target: the whole step ≤ 20 µs at the median.
 */
import { GatewayError } from '../core/errors.js'
import { PromptTemplate } from '../plugins/prompt-render/render.js'
import { BENCH_PROMPT_VARIABLES, benchPromptTemplate } from './prompt-template.js'

const envNumber = (name: string, fallback: number): number => {
  const raw = process.env[name]
  const n = raw === undefined || raw === '' ? fallback : Number(raw)
  if (!Number.isInteger(n) || n <= 0) throw new Error(`${name} must be a positive integer, got '${raw}'`)
  return n
}

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number
}

function main(): void {
  const batch = envNumber('BENCH_RENDER_BATCH', 1000)
  const batches = envNumber('BENCH_RENDER_BATCHES', 200)
  const max = 10_485_760
  const source = {
    template: benchPromptTemplate(),
    isRawTemplate: false,
    model: 'gpt-4o-mini',
    parameters: { temperature: 0.3, max_tokens: 256 },
    tools: null,
    toolChoice: null,
    functions: null,
  }
  const compileStart = process.hrtime.bigint()
  const template = PromptTemplate.compile(source, new Map(), 'Prompt pp-bench version 1', max)
  const compileUs = Number(process.hrtime.bigint() - compileStart) / 1000
  if (template instanceof GatewayError) throw template
  const body = { variables: BENCH_PROMPT_VARIABLES }
  const sample = template.buildRequest(body, max)
  if (sample instanceof GatewayError) throw sample

  let sink = 0
  const steps: Record<string, () => void> = {
    'render step (check + render + build + JSON.stringify + Buffer.from)': () => {
      const request = template.buildRequest(body, max) as Record<string, unknown>
      sink += Buffer.from(JSON.stringify(request)).length
    },
    'check + render + build (buildRequest)': () => {
      sink += (template.buildRequest(body, max) as Record<string, unknown>).messages === undefined ? 0 : 1
    },
    'JSON.stringify + Buffer.from of the built request': () => {
      sink += Buffer.from(JSON.stringify(sample)).length
    },
  }
  const rows: string[] = []
  for (const [name, step] of Object.entries(steps)) {
    for (let i = 0; i < batch * 20; i++) step()
    const perRender: number[] = []
    for (let b = 0; b < batches; b++) {
      const start = process.hrtime.bigint()
      for (let i = 0; i < batch; i++) step()
      perRender.push(Number(process.hrtime.bigint() - start) / 1000 / batch)
    }
    perRender.sort((x, y) => x - y)
    rows.push(`${name.padEnd(70)} median ${percentile(perRender, 50).toFixed(2).padStart(6)} µs   p10 ${percentile(perRender, 10).toFixed(2)}   p90 ${percentile(perRender, 90).toFixed(2)}`)
  }
  const bytes = Buffer.byteLength(source.template)
  process.stdout.write(`prompt render microbenchmark: ${bytes} B chat template, ${template.names.length} variables, ${batches} batches of ${batch} (node ${process.version})\n`)
  process.stdout.write(`compile (first, cold): ${compileUs.toFixed(0)} µs\n`)
  for (const row of rows) process.stdout.write(`${row}\n`)
  process.stdout.write(`target: render step ≤ 20 µs at the median\n`)
  if (sink < 0) process.stdout.write('\n')
}

main()
