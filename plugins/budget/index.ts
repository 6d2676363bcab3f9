import { BudgetAccounts, PriceTable } from '../../core/budgets.js'
import { definePlugin } from '../../core/plugin.js'
import { AdminStore } from '../../core/ports.js'
import { Clock, Logger } from '../../core/service.js'
import { BudgetBook } from './book.js'
import { budgetConfigSchema, type BudgetConfig } from './config.js'
import { BudgetPlugin } from './plugin.js'

export const budget = definePlugin<BudgetConfig>({
  name: 'budget',
  priority: 600,
  groups: ['inference', 'passthrough'],
  phases: ['onAccess', 'onLog'],
  requires: ['auth'],
  configSchema: budgetConfigSchema,
  inject: [BudgetAccounts, PriceTable, AdminStore, Clock, Logger],
  create: (config, deps) => {
    const book = deps[0]
    // The composition root registers a BudgetBook under BudgetAccounts whenever this plugin is enabled.
    if (!(book instanceof BudgetBook)) throw new Error('budget: BudgetAccounts must be the BudgetBook while the budget plugin is enabled')
    return new BudgetPlugin({
      config,
      book,
      prices: deps[1] as PriceTable,
      store: deps[2] as AdminStore,
      clock: deps[3] as Clock,
      logger: deps[4] as Logger,
    })
  },
})
