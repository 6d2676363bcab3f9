import { definePlugin } from '../../core/plugin.js'
import { AdminStore, ChangeNotifier } from '../../core/ports.js'
import { Clock, Logger } from '../../core/service.js'
import { authConfigSchema, type AuthConfig } from './config.js'
import { AuthPlugin } from './plugin.js'

export const auth = definePlugin<AuthConfig>({
  name: 'auth',
  priority: 1000,
  groups: ['inference', 'passthrough', 'admin'],
  phases: ['onRequest'],
  configSchema: authConfigSchema,
  inject: [AdminStore, ChangeNotifier, Clock, Logger],
  create: (config, deps) =>
    new AuthPlugin(config, deps[0] as AdminStore, deps[1] as ChangeNotifier, deps[2] as Clock, deps[3] as Logger),
})
