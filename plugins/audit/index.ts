import { definePlugin } from '../../core/plugin.js'
import { AdminStore } from '../../core/ports.js'
import { Logger } from '../../core/service.js'
import { auditConfigSchema, type AuditConfig } from './config.js'
import { AuditPlugin } from './plugin.js'

export const audit = definePlugin<AuditConfig>({
  name: 'audit',
  priority: 5,
  groups: ['admin'],
  phases: ['onLog'],
  requires: ['admin-api'],
  configSchema: auditConfigSchema,
  inject: [AdminStore, Logger],
  create: (config, deps) => new AuditPlugin(config, deps[0] as AdminStore, deps[1] as Logger),
})
