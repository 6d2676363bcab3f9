import { definePlugin } from '../../core/plugin.js'
import { AdminStore, ChangeNotifier, SecretCipher } from '../../core/ports.js'
import { Clock, Logger } from '../../core/service.js'
import { virtualKeyConfigSchema } from './config.js'
import { VirtualKeyPlugin } from './plugin.js'

export const virtualKey = definePlugin({
  name: 'virtual-key',
  priority: 800,
  groups: ['inference', 'passthrough'],
  phases: ['onRequest', 'onAttempt'],
  requires: ['auth'],
  configSchema: virtualKeyConfigSchema,
  inject: [AdminStore, SecretCipher, ChangeNotifier, Clock, Logger],
  create: (config, [store, cipher, notifier, clock, logger]) => new VirtualKeyPlugin(config, store, cipher, notifier, clock, logger),
})
