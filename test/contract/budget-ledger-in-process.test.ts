import { InProcessBudgetLedger } from '../../adapters/memory/in-process-budget-ledger.js'
import { describeBudgetLedgerContract } from './budget-ledger.contract.js'

describeBudgetLedgerContract('in process', async () => {
  let ledger = new InProcessBudgetLedger()
  await ledger.start()
  return {
    get ledger() {
      return ledger
    },
    // The in-process ledger loses its counters only with the process: a restart.
    async forget() {
      await ledger.close()
      ledger = new InProcessBudgetLedger()
      await ledger.start()
      return ledger
    },
    close: () => ledger.close(),
  }
})
