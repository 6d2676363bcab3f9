// Module hooks that let a plain `node` child process run the TypeScript sources, as vitest does
// in process: `./x.js` imports resolve to `./x.ts` when that exists, and `.ts` files are
// transpiled with esbuild (types stripped, nothing bundled). Registered by ts-register.mjs.
import { existsSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import { transform } from 'esbuild'

export async function resolve(specifier, context, nextResolve) {
  const relative = specifier.startsWith('./') || specifier.startsWith('../')
  if (relative && specifier.endsWith('.js') && context.parentURL?.startsWith('file:')) {
    const candidate = new URL(`${specifier.slice(0, -3)}.ts`, context.parentURL)
    if (existsSync(fileURLToPath(candidate))) return { url: candidate.href, format: 'module', shortCircuit: true }
  }
  return nextResolve(specifier, context)
}

export async function load(url, context, nextLoad) {
  if (!url.startsWith('file:') || !url.endsWith('.ts')) return nextLoad(url, context)
  const file = fileURLToPath(url)
  const { code } = await transform(await readFile(file, 'utf8'), { loader: 'ts', format: 'esm', target: 'esnext', sourcefile: file, sourcemap: 'inline' })
  return { format: 'module', source: code, shortCircuit: true }
}
