import { definePlugin } from '../../core/plugin.js'
import { CircuitBreaker, ProviderRegistry, UpstreamClient } from '../../core/ports.js'
import { forwardConfigSchema } from './config.js'
import { ForwardPlugin } from './plugin.js'

export const forward = definePlugin({
  name: 'forward',
  priority: 100,
  groups: ['inference', 'passthrough'],
  phases: ['onForward', 'onLog'],
  configSchema: forwardConfigSchema,
  inject: [ProviderRegistry, UpstreamClient, CircuitBreaker],
  create: (config, [registry, upstream, breaker]) => new ForwardPlugin(config, registry, upstream, breaker),
})
