import { BudgetAccounts, PriceTable } from '../../core/budgets.js'
import { definePlugin } from '../../core/plugin.js'
import { AdminStore } from '../../core/ports.js'
import { Clock, Logger } from '../../core/service.js'
import { BudgetBook } from './book.js'
import { budgetConfigSchema } from './config.js'
import { BudgetPlugin } from './plugin.js'

export const budget = definePlugin({
  name: 'budget',
  priority: 600,
  groups: ['inference', 'passthrough'],
  phases: ['onAccess', 'onAttempt', 'onAttemptEnd', 'onLog'],
  requires: ['auth'],
  configSchema: budgetConfigSchema,
  inject: [BudgetAccounts, PriceTable, AdminStore, Clock, Logger],
  create: (config, [book, prices, store, clock, logger]) => {
    // The composition root registers a BudgetBook under BudgetAccounts whenever this plugin is enabled.
    if (!(book instanceof BudgetBook)) throw new Error('budget: BudgetAccounts must be the BudgetBook while the budget plugin is enabled')
    return new BudgetPlugin({ config, book, prices, store, clock, logger })
  },
})
