import { definePlugin } from '../../core/plugin.js'
import { ProviderRegistry, UpstreamClient } from '../../core/ports.js'
import { forwardConfigSchema, type ForwardConfig } from './config.js'
import { ForwardPlugin } from './plugin.js'

export const forward = definePlugin<ForwardConfig>({
  name: 'forward',
  priority: 100,
  groups: ['inference', 'passthrough'],
  phases: ['onForward', 'onLog'],
  configSchema: forwardConfigSchema,
  inject: [ProviderRegistry, UpstreamClient],
  create: (config, deps) => new ForwardPlugin(config, deps[0] as ProviderRegistry, deps[1] as UpstreamClient),
})
