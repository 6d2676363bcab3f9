import { randomUUID } from 'node:crypto'
import { MongoClient } from 'mongodb'
import { afterAll, describe, it } from 'vitest'
import { MongoUsageStore } from '../../adapters/mongo/mongo-usage-store.js'
import { mongoTarget } from '../helpers/mongod.js'
import { describeUsageStoreContract } from './budget-usage-store.contract.js'

const SKIPPED = 'MongoDB usage store contract skipped: set MONGODB_URI or put mongod on the PATH'
const target = await mongoTarget()

if (target === null) {
  console.warn(SKIPPED)
  describe.skip('UsageStore contract: MongoDB', () => {
    it(SKIPPED, () => {})
  })
} else {
  const uri = target.uri
  const databases: string[] = []

  afterAll(async () => {
    const client = new MongoClient(uri)
    try {
      await client.connect()
      for (const name of databases) await client.db(name).dropDatabase()
    } finally {
      await client.close()
      await target.stop()
    }
  })

  describeUsageStoreContract('MongoDB', async () => {
    const databaseName = `gw_test_${randomUUID().replaceAll('-', '')}`
    databases.push(databaseName)
    let store = new MongoUsageStore({ uri, databaseName })
    await store.start()
    return {
      get store() {
        return store
      },
      async reopen() {
        await store.close()
        store = new MongoUsageStore({ uri, databaseName })
        await store.start()
        return store
      },
      close: () => store.close(),
    }
  })
}
