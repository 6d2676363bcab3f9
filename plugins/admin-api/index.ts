import { BudgetAccounts } from '../../core/budgets.js'
import { LogServices } from '../../core/log-exports.js'
import { definePlugin } from '../../core/plugin.js'
import { AdminStore, ChangeNotifier, ProviderRegistry, SecretCipher } from '../../core/ports.js'
import { Clock, Logger } from '../../core/service.js'
import { adminApiConfigSchema } from './config.js'
import { AdminApiPlugin } from './plugin.js'

export const adminApi = definePlugin({
  name: 'admin-api',
  priority: 110,
  groups: ['admin'],
  phases: ['onForward'],
  requires: ['auth', 'scope-check'],
  configSchema: adminApiConfigSchema,
  inject: [AdminStore, ChangeNotifier, Clock, ProviderRegistry, SecretCipher, BudgetAccounts, LogServices, Logger],
  create: (config, [store, notifier, clock, registry, cipher, budgets, logs, logger]) =>
    new AdminApiPlugin({ config, store, notifier, clock, registry, cipher, budgets, logs, logger }),
})
