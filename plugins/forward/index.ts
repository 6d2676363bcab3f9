import { definePlugin } from '../../core/plugin.js'
import { ProviderRegistry, UpstreamClient } from '../../core/ports.js'
import { forwardConfigSchema } from './config.js'
import { ForwardPlugin } from './plugin.js'

export const forward = definePlugin({
  name: 'forward',
  priority: 100,
  groups: ['inference', 'passthrough'],
  phases: ['onForward', 'onLog'],
  configSchema: forwardConfigSchema,
  inject: [ProviderRegistry, UpstreamClient],
  create: (config, [registry, upstream]) => new ForwardPlugin(config, registry, upstream, null),
})
