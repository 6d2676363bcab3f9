import { readdirSync, readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import defaults from '../../../config/default.json' with { type: 'json' }
import { PLUGIN_CATALOGUE } from '../../../plugins/index.js'

const readme = readFileSync(new URL('../../../README.md', import.meta.url), 'utf8')

describe('README configuration table', () => {
  it('lists every plugin with its priority, phases, groups, default and requirements', () => {
    const rows = new Map<string, string[]>()
    for (const line of readme.split('\n')) {
      const match = /^\| `([a-z-]+)` \| (\d+) \| ([^|]+) \| ([^|]+) \| (yes|no) \| ([^|]+) \|/.exec(line)
      if (match) rows.set(match[1] as string, match.slice(2, 7).map((cell) => cell.trim()))
    }
    const settings = defaults.plugins as Record<string, { enabled: boolean; priority?: number }>
    expect([...rows.keys()].sort()).toEqual(PLUGIN_CATALOGUE.map((plugin) => plugin.name).sort())
    for (const plugin of PLUGIN_CATALOGUE) {
      const [priority, phases, groups, enabled, requires] = rows.get(plugin.name) as string[]
      expect(Number(priority)).toBe(plugin.priority)
      expect(settings[plugin.name]?.priority ?? plugin.priority).toBe(plugin.priority)
      expect(phases).toBe(plugin.phases.join(', '))
      expect(groups).toBe(plugin.groups.join(', '))
      expect(enabled).toBe(settings[plugin.name]?.enabled ? 'yes' : 'no')
      expect(requires).toBe(plugin.requires?.join(', ') ?? '-')
    }
  })
})

describe('README layout', () => {
  const layout = /## Development\n\n```\n([\s\S]*?)```/.exec(readme)?.[1] ?? ''
  const folders = (dir: string): string[] =>
    readdirSync(new URL(`../../../${dir}/`, import.meta.url), { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .map((entry) => entry.name)

  it('names every plugin and every adapter folder', () => {
    expect(layout.length).toBeGreaterThan(0)
    // Each folder in its own block, whole names only (`log` must not pass because `log sink` is written).
    const block = (from: string, to: string): string => layout.slice(layout.indexOf(from), layout.indexOf(to))
    const named = (text: string, name: string): boolean => new RegExp(`(?<![\\w-])${name}(?![\\w-])`).test(text)
    const plugins = block('plugins/', 'adapters/')
    const adapters = block('adapters/', 'config/')
    const missing = [
      ...folders('plugins').filter((name) => !named(plugins, name)),
      ...folders('adapters').filter((name) => !named(adapters, `${name}/`)),
    ]
    expect(missing).toEqual([])
  })
})

