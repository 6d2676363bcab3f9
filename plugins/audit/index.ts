import { definePlugin } from '../../core/plugin.js'
import { AdminStore } from '../../core/ports.js'
import { Logger } from '../../core/service.js'
import { auditConfigSchema } from './config.js'
import { AuditPlugin } from './plugin.js'

export const audit = definePlugin({
  name: 'audit',
  priority: 5,
  groups: ['admin'],
  phases: ['onLog'],
  requires: ['admin-api'],
  configSchema: auditConfigSchema,
  inject: [AdminStore, Logger],
  create: (config, [store, logger]) => new AuditPlugin(config, store, logger),
})
