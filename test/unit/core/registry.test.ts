import { describe, expect, it } from 'vitest'
import { z } from 'zod'
import { definePlugin, type PhaseName, type PluginDefinition } from '../../../core/plugin.js'
import { checkDeclaredPhases, ConfigError, resolvePlugins } from '../../../core/registry.js'
import type { RouteGroup } from '../../../core/routes.js'

function plugin(name: string, priority: number, phases: PhaseName[], groups: RouteGroup[] = ['inference'], requires?: string[]): PluginDefinition {
  return definePlugin({
    name,
    priority,
    groups,
    phases,
    ...(requires ? { requires } : {}),
    configSchema: z.object({ limit: z.number().int().default(1) }).strict(),
    inject: [],
    create: () => ({}),
  }) as PluginDefinition
}

const catalogue = [
  plugin('auth', 1000, ['onRequest'], ['inference', 'admin']),
  plugin('scope', 900, ['onRequest'], ['inference', 'admin'], ['auth']),
  plugin('forward', 100, ['onForward'], ['inference']),
  plugin('admin', 110, ['onForward'], ['admin']),
  plugin('log', 10, ['onLog'], ['inference']),
]
const allOn = { auth: { enabled: true }, scope: { enabled: true }, forward: { enabled: true }, admin: { enabled: true }, log: { enabled: true } }

function failure(settings: Record<string, { enabled: boolean; priority?: number; config?: unknown }>): ConfigError {
  try {
    resolvePlugins(catalogue, settings)
  } catch (error) {
    if (error instanceof ConfigError) return error
    throw error
  }
  throw new Error('expected a ConfigError')
}

describe('resolvePlugins', () => {
  it('orders enabled plugins by priority, high first, with parsed config defaults', () => {
    const result = resolvePlugins(catalogue, allOn)
    expect(result.enabled.map((entry) => entry.definition.name)).toEqual(['auth', 'scope', 'admin', 'forward', 'log'])
    expect(result.enabled[0]?.config).toEqual({ limit: 1 })
    expect([...result.activeGroups].sort()).toEqual(['admin', 'inference'])
  })

  it('lets config override a priority', () => {
    const result = resolvePlugins(catalogue, { ...allOn, log: { enabled: true, priority: 5000 } })
    expect(result.enabled[0]?.definition.name).toBe('log')
  })

  it('refuses an unknown plugin name, naming it', () => {
    const error = failure({ ...allOn, cahce: { enabled: true } })
    expect(error.key).toBe('plugins.cahce')
    expect(error.message).toContain('unknown plugin')
  })

  it('refuses a catalogue plugin missing from the config', () => {
    const { log: _log, ...rest } = allOn
    expect(failure(rest).key).toBe('plugins.log')
  })

  it('refuses duplicate priorities, naming both plugins', () => {
    const error = failure({ ...allOn, log: { enabled: true, priority: 900 } })
    expect(error.message).toMatch(/priority 900/)
    expect(error.message).toMatch(/scope|log/)
  })

  it('refuses an unmet requirement', () => {
    const error = failure({ ...allOn, auth: { enabled: false } })
    expect(error.key).toBe('plugins.scope')
    expect(error.message).toContain('requires plugin "auth"')
  })

  it('refuses invalid plugin config with the path of the bad value', () => {
    const error = failure({ ...allOn, log: { enabled: true, config: { limit: 'x' } } })
    expect(error.key).toBe('plugins.log.config.limit')
    expect(failure({ ...allOn, log: { enabled: true, config: { extra: 1 } } }).key).toBe('plugins.log.config')
  })

  it('switches off a group whose terminal is disabled, keeping the others', () => {
    const result = resolvePlugins(catalogue, { ...allOn, forward: { enabled: false } })
    expect(result.activeGroups.has('inference')).toBe(false)
    expect(result.inactiveGroups).toContain('inference')
    expect(result.activeGroups.has('admin')).toBe(true)
    const adminOff = resolvePlugins(catalogue, { ...allOn, admin: { enabled: false } })
    expect([...adminOff.activeGroups]).toEqual(['inference'])
  })

  it('refuses two terminals in one group', () => {
    const two = [...catalogue, plugin('forward2', 90, ['onForward'], ['inference'])]
    expect(() => resolvePlugins(two, { ...allOn, forward2: { enabled: true } })).toThrow(/found 2 \(forward, forward2\)/)
  })

  it('refuses a non-boolean enabled flag', () => {
    expect(failure({ ...allOn, log: { enabled: 'yes' as unknown as boolean } }).key).toBe('plugins.log.enabled')
  })
})

describe('checkDeclaredPhases', () => {
  const definition = plugin('limits', 700, ['onAccess', 'onLog'])

  it('accepts a plugin whose hooks are exactly its declared phases', () => {
    expect(() => checkDeclaredPhases(definition, { onAccess: () => undefined, onLog: () => {} })).not.toThrow()
  })

  it('refuses a hook that is not declared, and a declared phase with no hook, naming both lists', () => {
    expect(() => checkDeclaredPhases(definition, { onAccess: () => undefined, onLog: () => {}, onRequest: () => undefined })).toThrow(
      'plugins.limits: the plugin declares the phases [onAccess, onLog] but implements [onRequest, onAccess, onLog]',
    )
    expect(() => checkDeclaredPhases(definition, { onLog: () => {} })).toThrow(ConfigError)
  })
})

