import { BudgetAccounts } from '../../core/budgets.js'
import { LogServices } from '../../core/log-exports.js'
import { definePlugin } from '../../core/plugin.js'
import { AdminStore, ChangeNotifier, ProviderRegistry, SecretCipher } from '../../core/ports.js'
import { Clock, Logger } from '../../core/service.js'
import { adminApiConfigSchema, type AdminApiConfig } from './config.js'
import { AdminApiPlugin } from './plugin.js'

export const adminApi = definePlugin<AdminApiConfig>({
  name: 'admin-api',
  priority: 110,
  groups: ['admin'],
  phases: ['onForward'],
  requires: ['auth', 'scope-check'],
  configSchema: adminApiConfigSchema,
  inject: [AdminStore, ChangeNotifier, Clock, ProviderRegistry, SecretCipher, BudgetAccounts, LogServices, Logger],
  create: (config, deps) =>
    new AdminApiPlugin({
      config,
      store: deps[0] as AdminStore,
      notifier: deps[1] as ChangeNotifier,
      clock: deps[2] as Clock,
      registry: deps[3] as ProviderRegistry,
      cipher: deps[4] as SecretCipher,
      budgets: deps[5] as BudgetAccounts,
      logs: deps[6] as LogServices | null,
      logger: deps[7] as Logger,
    }),
})
