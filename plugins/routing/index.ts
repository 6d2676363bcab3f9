import { definePlugin } from '../../core/plugin.js'
import { AdminStore, ChangeNotifier } from '../../core/ports.js'
import { Clock, Logger } from '../../core/service.js'
import { routingConfigSchema } from './config.js'
import { RoutingPlugin } from './plugin.js'

export const routing = definePlugin({
  name: 'routing',
  priority: 820,
  groups: ['inference', 'passthrough'],
  phases: ['onRequest'],
  configSchema: routingConfigSchema,
  inject: [AdminStore, ChangeNotifier, Clock, Logger],
  create: (config, [store, notifier, clock, logger]) => new RoutingPlugin(config, store, notifier, clock, logger),
})
