/**
 * Boot checks: the plugin catalogue × the operator's config → the enabled plugins, ordered and
 * validated. Everything that can be wrong with plugin configuration fails here, at boot, with a
 * message naming the config key; nothing is checked per request.
 */
import type { GatewayPlugin, PhaseName, PluginDefinition } from './plugin.js'
import { ROUTE_GROUPS, type RouteGroup } from './routes.js'

/** A configuration mistake found at boot. `key` is the dotted config path it is about. */
export class ConfigError extends Error {
  readonly key: string
  constructor(key: string, message: string) {
    super(`${key}: ${message}`)
    this.name = 'ConfigError'
    this.key = key
  }
}

/** One plugin's entry in the config (`plugins.<name>`). */
export interface PluginSettings {
  readonly enabled: boolean
  readonly priority?: number
  readonly config?: unknown
}

/** A plugin that passed every check, with its effective priority and parsed config. */
export interface EnabledPlugin {
  readonly definition: PluginDefinition
  readonly priority: number
  readonly config: unknown
}

/** The result of resolution: enabled plugins (priority, high first) and the groups that serve requests. */
export interface PluginResolution {
  readonly enabled: readonly EnabledPlugin[]
  /** Route groups whose one terminal plugin is enabled: they serve requests. */
  readonly activeGroups: ReadonlySet<RouteGroup>
  /** Route groups with no terminal enabled: switched off, their routes answer 404 (boot logs them). */
  readonly inactiveGroups: readonly RouteGroup[]
}

/**
 * Validates `settings` against `catalogue`:
 * unknown plugin names, catalogue plugins missing from the config, invalid plugin config,
 * duplicate effective priorities, unmet `requires`, and more than one terminal (`onForward`) plugin
 * in a route group. A group whose terminal is disabled is switched off (its routes answer 404), so
 * an operator can turn off e.g. the Admin API by disabling `admin-api` alone.
 */
export function resolvePlugins(
  catalogue: readonly PluginDefinition[],
  settings: Readonly<Record<string, PluginSettings>>,
): PluginResolution {
  const byName = new Map<string, PluginDefinition>()
  for (const definition of catalogue) {
    if (byName.has(definition.name)) throw new ConfigError(`plugins.${definition.name}`, 'defined twice in the plugin catalogue')
    byName.set(definition.name, definition)
  }
  for (const name of Object.keys(settings)) {
    if (!byName.has(name)) {
      throw new ConfigError(`plugins.${name}`, `unknown plugin (known: ${[...byName.keys()].join(', ')})`)
    }
  }

  const enabled: EnabledPlugin[] = []
  for (const definition of catalogue) {
    const entry = settings[definition.name]
    if (entry === undefined) throw new ConfigError(`plugins.${definition.name}`, 'missing: every plugin must be listed with "enabled"')
    if (typeof entry.enabled !== 'boolean') throw new ConfigError(`plugins.${definition.name}.enabled`, 'must be true or false')
    if (!entry.enabled) continue
    const priority = entry.priority ?? definition.priority
    if (!Number.isInteger(priority)) throw new ConfigError(`plugins.${definition.name}.priority`, 'must be an integer')
    const parsed = definition.configSchema.safeParse(entry.config ?? {})
    if (!parsed.success) {
      const issue = parsed.error.issues[0]
      const path = issue && issue.path.length > 0 ? `.${issue.path.map(String).join('.')}` : ''
      throw new ConfigError(`plugins.${definition.name}.config${path}`, issue?.message ?? 'invalid')
    }
    enabled.push({ definition, priority, config: parsed.data })
  }

  enabled.sort((a, b) => b.priority - a.priority)
  for (let i = 1; i < enabled.length; i++) {
    const previous = enabled[i - 1] as EnabledPlugin
    const current = enabled[i] as EnabledPlugin
    if (previous.priority === current.priority) {
      throw new ConfigError(
        `plugins.${current.definition.name}.priority`,
        `priority ${current.priority} is also used by "${previous.definition.name}"; priorities must be unique`,
      )
    }
  }

  const enabledNames = new Set(enabled.map((plugin) => plugin.definition.name))
  for (const plugin of enabled) {
    for (const required of plugin.definition.requires ?? []) {
      if (!enabledNames.has(required)) {
        throw new ConfigError(`plugins.${plugin.definition.name}`, `requires plugin "${required}", which is disabled`)
      }
    }
  }

  const activeGroups = new Set<RouteGroup>()
  const inactiveGroups: RouteGroup[] = []
  for (const group of ROUTE_GROUPS) {
    const terminals = enabled.filter((plugin) => plugin.definition.groups.includes(group) && plugin.definition.phases.includes('onForward'))
    if (terminals.length > 1) {
      const names = terminals.map((plugin) => plugin.definition.name).join(', ')
      throw new ConfigError('plugins', `route group "${group}" needs exactly one enabled terminal (onForward) plugin, found ${terminals.length} (${names})`)
    }
    if (terminals.length === 1) activeGroups.add(group)
    else inactiveGroups.push(group)
  }
  return { enabled, activeGroups, inactiveGroups }
}

const PHASES: readonly PhaseName[] = ['onRequest', 'onAccess', 'onForward', 'onAttempt', 'onAttemptEnd', 'onResponse', 'onChunk', 'onLog']

/**
 * Throws when a created plugin's hooks differ from the phases its definition declares: the
 * declaration drives terminal detection and the README's plugin table, the hooks drive the
 * pipeline, so they must be the same list.
 */
export function checkDeclaredPhases(definition: PluginDefinition, plugin: GatewayPlugin): void {
  const implemented = PHASES.filter((phase) => typeof plugin[phase] === 'function')
  const declared = PHASES.filter((phase) => definition.phases.includes(phase))
  if (implemented.join() === declared.join()) return
  throw new ConfigError(
    `plugins.${definition.name}`,
    `the plugin declares the phases [${declared.join(', ')}] but implements [${implemented.join(', ')}]`,
  )
}
