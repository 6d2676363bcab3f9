import { definePlugin } from '../../core/plugin.js'
import { AdminStore, ChangeNotifier, SecretCipher } from '../../core/ports.js'
import { Clock, Logger } from '../../core/service.js'
import { virtualKeyConfigSchema, type VirtualKeyConfig } from './config.js'
import { VirtualKeyPlugin } from './plugin.js'

export const virtualKey = definePlugin<VirtualKeyConfig>({
  name: 'virtual-key',
  priority: 800,
  groups: ['inference', 'passthrough'],
  phases: ['onRequest'],
  requires: ['auth'],
  configSchema: virtualKeyConfigSchema,
  inject: [AdminStore, SecretCipher, ChangeNotifier, Clock, Logger],
  create: (config, deps) =>
    new VirtualKeyPlugin(
      config,
      deps[0] as AdminStore,
      deps[1] as SecretCipher,
      deps[2] as ChangeNotifier,
      deps[3] as Clock,
      deps[4] as Logger,
    ),
})
