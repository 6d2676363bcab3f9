import { PriceTable } from '../../core/budgets.js'
import { definePlugin } from '../../core/plugin.js'
import { LogSink } from '../../core/ports.js'
import { logConfigSchema } from './config.js'
import { LogPlugin } from './plugin.js'

export const log = definePlugin({
  name: 'log',
  priority: 10,
  groups: ['inference', 'passthrough'],
  phases: ['onLog'],
  configSchema: logConfigSchema,
  inject: [LogSink, PriceTable],
  create: (config, [sink, prices]) => new LogPlugin(config, sink, prices),
})
