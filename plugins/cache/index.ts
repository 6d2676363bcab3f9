import { definePlugin } from '../../core/plugin.js'
import { ResponseCache } from '../../core/ports.js'
import { Clock, Logger } from '../../core/service.js'
import { cacheConfigSchema } from './config.js'
import { CachePlugin } from './plugin.js'

export const cache = definePlugin({
  name: 'cache',
  priority: 550,
  groups: ['inference'],
  phases: ['onAttempt', 'onResponse', 'onChunk', 'onLog'],
  configSchema: cacheConfigSchema,
  inject: [ResponseCache, Clock, Logger],
  create: (config, [store, clock, logger]) => new CachePlugin(config, store, clock, logger),
})
