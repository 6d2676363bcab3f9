import { definePlugin } from '../../core/plugin.js'
import { AdminStore, ChangeNotifier } from '../../core/ports.js'
import { Clock, Logger } from '../../core/service.js'
import { promptRenderConfigSchema } from './config.js'
import { PromptRenderPlugin } from './plugin.js'

export const promptRender = definePlugin({
  name: 'prompt-render',
  priority: 850,
  groups: ['inference'],
  phases: ['onRequest', 'onAccess'],
  requires: ['auth'],
  configSchema: promptRenderConfigSchema,
  inject: [AdminStore, ChangeNotifier, Clock, Logger],
  create: (config, [store, notifier, clock, logger]) => new PromptRenderPlugin(config, store, notifier, clock, logger),
})
