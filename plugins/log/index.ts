import { PriceTable } from '../../core/budgets.js'
import { definePlugin } from '../../core/plugin.js'
import { LogSink } from '../../core/ports.js'
import { logConfigSchema, type LogConfig } from './config.js'
import { LogPlugin } from './plugin.js'

export const log = definePlugin<LogConfig>({
  name: 'log',
  priority: 10,
  groups: ['inference', 'passthrough'],
  phases: ['onLog'],
  configSchema: logConfigSchema,
  inject: [LogSink, PriceTable],
  create: (config, deps) => new LogPlugin(config, deps[0] as LogSink, deps[1] as PriceTable),
})
