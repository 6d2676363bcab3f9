import { definePlugin } from '../../core/plugin.js'
import { scopeCheckConfigSchema } from './config.js'
import { ScopeCheckPlugin } from './plugin.js'

export const scopeCheck = definePlugin({
  name: 'scope-check',
  priority: 900,
  groups: ['inference', 'passthrough', 'admin'],
  phases: ['onRequest'],
  requires: ['auth'],
  configSchema: scopeCheckConfigSchema,
  inject: [],
  create: () => new ScopeCheckPlugin(),
})
