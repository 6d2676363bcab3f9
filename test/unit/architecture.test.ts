/**
 * The house's floors (DESIGN.md §2), checked on the source: every relative import of `core/`,
 * `plugins/`, `adapters/` and `config/` is read (static `import`/`export … from`, and `import()`),
 * and each must keep to its floor's rules. `core/` must also form a graph without cycles, so it has
 * a bottom that everything else stands on.
 */
import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..')
const FLOORS = ['core', 'plugins', 'adapters', 'config'] as const

/** Adapter folders that are shared libraries of other adapters (and import only core). */
const SHARED_ADAPTER_FOLDERS = new Set(['log-sink', 'sql'])

interface SourceFile {
  /** Path from the repository root, with `/`. */
  readonly path: string
  /** Relative imports resolved to repository paths (`.js` read as `.ts`). */
  readonly local: readonly string[]
  /** Package imports (`zod`, `node:fs`, `uWebSockets.js`, ...). */
  readonly packages: readonly string[]
}

function sourceFiles(folder: string): string[] {
  const found: string[] = []
  for (const entry of readdirSync(join(ROOT, folder), { withFileTypes: true })) {
    const path = `${folder}/${entry.name}`
    if (entry.isDirectory()) found.push(...sourceFiles(path))
    else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) found.push(path)
  }
  return found
}

const IMPORT = /(?:^|\n)\s*(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|(?:^|\n)\s*import\s*['"]([^'"]+)['"]|\bimport\(\s*['"]([^'"]+)['"]\s*\)/g

function read(path: string): SourceFile {
  const text = readFileSync(join(ROOT, path), 'utf8')
  const local: string[] = []
  const packages: string[] = []
  for (const match of text.matchAll(IMPORT)) {
    const specifier = (match[1] ?? match[2] ?? match[3]) as string
    if (specifier.startsWith('.')) {
      local.push(relative(ROOT, resolve(ROOT, dirname(path), specifier)).replaceAll('\\', '/').replace(/\.js$/, '.ts'))
    } else {
      packages.push(specifier)
    }
  }
  return { path, local, packages }
}

const FILES: readonly SourceFile[] = FLOORS.flatMap((floor) => sourceFiles(floor)).map(read)

function floorOf(path: string): string {
  return path.split('/')[0] as string
}

/** `plugins/auth/plugin.ts` → `auth`; `plugins/index.ts` → `` (the catalogue). */
function folderOf(path: string): string {
  const parts = path.split('/')
  return parts.length > 2 ? (parts[1] as string) : ''
}

/** Every `file → import` that breaks `allowed`, as readable lines. */
function violations(allowed: (file: SourceFile, target: string) => boolean): string[] {
  const found: string[] = []
  for (const file of FILES) for (const target of file.local) if (!allowed(file, target)) found.push(`${file.path} → ${target}`)
  return found
}

describe('layering (DESIGN.md §2)', () => {
  it('reads the sources it checks', () => {
    expect(FILES.filter((file) => file.path.startsWith('core/')).length).toBeGreaterThan(10)
    expect(FILES.filter((file) => file.path.startsWith('plugins/')).length).toBeGreaterThan(20)
    expect(FILES.some((file) => file.path === 'config/wiring.ts')).toBe(true)
  })

  it('core imports nothing above it', () => {
    expect(violations((file, target) => floorOf(file.path) !== 'core' || floorOf(target) === 'core')).toEqual([])
  })

  it('a plugin imports core and its own folder only: never adapters, config or another plugin', () => {
    const catalogue = (file: SourceFile, target: string): boolean => file.path === 'plugins/index.ts' && /^plugins\/[a-z-]+\/index\.ts$/.test(target)
    expect(
      violations((file, target) => {
        if (floorOf(file.path) !== 'plugins') return true
        if (floorOf(target) === 'core') return true
        return catalogue(file, target) || (floorOf(target) === 'plugins' && folderOf(target) === folderOf(file.path) && folderOf(file.path) !== '')
      }),
    ).toEqual([])
  })

  it('an adapter imports core, its own folder and the shared adapter libraries only: never plugins or config', () => {
    expect(
      violations((file, target) => {
        if (floorOf(file.path) !== 'adapters') return true
        if (floorOf(target) === 'core') return true
        if (floorOf(target) !== 'adapters') return false
        if (folderOf(target) === folderOf(file.path)) return true
        // A shared library serves the adapters; it leans on no adapter itself.
        return SHARED_ADAPTER_FOLDERS.has(folderOf(target)) && !SHARED_ADAPTER_FOLDERS.has(folderOf(file.path))
      }),
    ).toEqual([])
  })

  it('tsyringe is imported by the composition root only', () => {
    expect(FILES.filter((file) => file.packages.includes('tsyringe')).map((file) => file.path)).toEqual(['config/wiring.ts'])
  })

  it('uWebSockets.js is imported by core/http only', () => {
    expect(FILES.filter((file) => file.packages.includes('uWebSockets.js') && !file.path.startsWith('core/http/')).map((file) => file.path)).toEqual([])
  })
})

describe('core has a bottom', () => {
  /** Every cycle of the import graph among `files`, each once, as `a → b → a`. */
  function cycles(files: readonly SourceFile[]): string[] {
    const edges = new Map(files.map((file) => [file.path, file.local.filter((target) => files.some((other) => other.path === target))]))
    const found = new Set<string>()
    const stack: string[] = []
    const onStack = new Set<string>()
    const done = new Set<string>()
    const visit = (node: string): void => {
      stack.push(node)
      onStack.add(node)
      for (const next of edges.get(node) ?? []) {
        if (onStack.has(next)) {
          const loop = stack.slice(stack.indexOf(next))
          // One spelling per cycle: start at its smallest file name.
          const start = loop.indexOf([...loop].sort()[0] as string)
          const turned = [...loop.slice(start), ...loop.slice(0, start)]
          found.add([...turned, turned[0]].join(' → '))
        } else if (!done.has(next)) {
          visit(next)
        }
      }
      stack.pop()
      onStack.delete(node)
      done.add(node)
    }
    for (const file of files) if (!done.has(file.path)) visit(file.path)
    return [...found].sort()
  }

  it('no import cycle among core files (type imports included)', () => {
    expect(cycles(FILES.filter((file) => file.path.startsWith('core/')))).toEqual([])
  })

  it('the cycle finder finds a cycle (so the check above can fail)', () => {
    const looped: SourceFile[] = [
      { path: 'core/a.ts', local: ['core/b.ts'], packages: [] },
      { path: 'core/b.ts', local: ['core/c.ts'], packages: [] },
      { path: 'core/c.ts', local: ['core/a.ts'], packages: [] },
    ]
    expect(cycles(looped)).toEqual(['core/a.ts → core/b.ts → core/c.ts → core/a.ts'])
  })
})
