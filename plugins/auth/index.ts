import { definePlugin } from '../../core/plugin.js'
import { AdminStore, ChangeNotifier, OutboundFetch } from '../../core/ports.js'
import { Clock, Logger } from '../../core/service.js'
import { authConfigSchema } from './config.js'
import { AuthPlugin } from './plugin.js'

export const auth = definePlugin({
  name: 'auth',
  priority: 1000,
  groups: ['inference', 'passthrough', 'admin'],
  phases: ['onRequest'],
  configSchema: authConfigSchema,
  inject: [AdminStore, ChangeNotifier, Clock, Logger, OutboundFetch],
  create: (config, [store, notifier, clock, logger, outbound]) => new AuthPlugin(config, store, notifier, clock, logger, outbound),
})
