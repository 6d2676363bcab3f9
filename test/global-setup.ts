import type { TestProject } from 'vitest/node'
import { startClickHouse, startRedis } from './helpers/services.js'

// How tests reach the services: `inject('redisUrl')` / `inject('clickhouseUrl')` from 'vitest'
// (typed by the augmentation below). The same URLs are also exported as the environment variables
// GATEWAY_TEST_REDIS_URL / GATEWAY_TEST_CLICKHOUSE_URL, which forked workers and any process they
// spawn (e.g. a gateway started as a child in e2e tests) inherit. When those variables are already
// set before the run, the servers they point at are used and nothing is started.
declare module 'vitest' {
  export interface ProvidedContext {
    /** `redis://127.0.0.1:PORT` of the run's throwaway redis-server. */
    redisUrl: string
    /** `http://127.0.0.1:PORT` (HTTP interface, user `default`, no password) of the run's clickhouse-server. */
    clickhouseUrl: string
  }
}

const REDIS_ENV = 'GATEWAY_TEST_REDIS_URL'
const CLICKHOUSE_ENV = 'GATEWAY_TEST_CLICKHOUSE_URL'

const stops: Array<() => Promise<void>> = []
const exported: string[] = []

async function urlFor(envName: string, start: () => Promise<{ url: string; stop(): Promise<void> }>): Promise<string> {
  const external = process.env[envName]
  if (external !== undefined && external !== '') return external
  const service = await start()
  stops.push(service.stop)
  process.env[envName] = service.url
  exported.push(envName)
  return service.url
}

/** Starts one Redis and one ClickHouse for the whole run and provides their URLs. */
export async function setup(project: TestProject): Promise<void> {
  const [redis, clickhouse] = await Promise.allSettled([urlFor(REDIS_ENV, startRedis), urlFor(CLICKHOUSE_ENV, startClickHouse)])
  if (redis.status === 'rejected' || clickhouse.status === 'rejected') {
    await teardown()
    throw redis.status === 'rejected' ? redis.reason : (clickhouse as PromiseRejectedResult).reason
  }
  project.provide('redisUrl', redis.value)
  project.provide('clickhouseUrl', clickhouse.value)
}

/** Stops whatever `setup` started. */
export async function teardown(): Promise<void> {
  for (const name of exported.splice(0)) delete process.env[name]
  await Promise.allSettled(stops.splice(0).map((stop) => stop()))
}
