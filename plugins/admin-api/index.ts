import { definePlugin } from '../../core/plugin.js'
import { AdminStore, ChangeNotifier, Clock } from '../../core/ports.js'
import { adminApiConfigSchema, type AdminApiConfig } from './config.js'
import { AdminApiPlugin } from './plugin.js'

export const adminApi = definePlugin<AdminApiConfig>({
  name: 'admin-api',
  priority: 110,
  groups: ['admin'],
  phases: ['onForward'],
  requires: ['auth', 'scope-check'],
  configSchema: adminApiConfigSchema,
  inject: [AdminStore, ChangeNotifier, Clock],
  create: (_config, deps) => new AdminApiPlugin(deps[0] as AdminStore, deps[1] as ChangeNotifier, deps[2] as Clock),
})
