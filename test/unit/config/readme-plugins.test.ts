import { readFileSync } from 'node:fs'
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
