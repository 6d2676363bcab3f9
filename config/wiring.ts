/**
 * The composition root: the only module that imports tsyringe and knows every concrete class.
 *
 * Each port token gets a caching factory for its adapter. Only the tokens that enabled plugins
 * `inject` are ever resolved, so an adapter no enabled plugin needs is never constructed or started
 * (turning `log` off means the log store is never opened). Plugins are built here with explicit
 * arguments; they never see the container.
 *
 * The environment picks the production adapters: `MONGODB_URI` → MongoDB admin store (else the
 * embedded DuckDB file) and budget usage store, `REDIS_URL` → Redis change notifier, rate limiter,
 * budget ledger, response cache and circuit breakers (else in process), `CLICKHOUSE_URL` → ClickHouse log sink and log analytics (else the DuckDB file;
 * either journals under `<dataDir>/log-journal/` while its store is unreachable).
 * Service names carry the technology where there is a choice, so `/readyz` shows which adapter runs.
 * The MongoDB, Redis and ClickHouse adapters are imported only when their URL is set: each pulls
 * in its driver, and the three together cost about 28 MB of memory that a gateway on the embedded
 * defaults would carry for nothing.
 */
import 'reflect-metadata'
import { join } from 'node:path'
import { pino } from 'pino'
import { container as rootContainer, instanceCachingFactory, type DependencyContainer } from 'tsyringe'
import { AesGcmSecretCipher } from '../adapters/crypto/aes-gcm-secret-cipher.js'
import { MasterKeyError, resolveMasterKey } from '../adapters/crypto/master-key.js'
import { DuckDbAdminStore } from '../adapters/embedded/duckdb-admin-store.js'
import { DuckDbDatabase } from '../adapters/embedded/duckdb-database.js'
import { DuckDbLogAnalytics } from '../adapters/embedded/duckdb-log-analytics.js'
import { DuckDbLogSink } from '../adapters/embedded/duckdb-log-sink.js'
import { DuckDbUsageStore } from '../adapters/embedded/duckdb-usage-store.js'
import { FileExportStore } from '../adapters/embedded/file-export-store.js'
import { InProcessBudgetLedger } from '../adapters/memory/in-process-budget-ledger.js'
import { InProcessChangeNotifier } from '../adapters/memory/in-process-change-notifier.js'
import { InProcessCircuitBreaker } from '../adapters/memory/in-process-circuit-breaker.js'
import { InProcessRateLimiter } from '../adapters/memory/in-process-rate-limiter.js'
import { InProcessResponseCache } from '../adapters/memory/in-process-response-cache.js'
import { connectAddressPolicy, parseAllowList } from '../adapters/providers/custom-host-policy.js'
import { TableProviderRegistry } from '../adapters/providers/provider-registry.js'
import { UndiciUpstreamClient } from '../adapters/providers/upstream-client.js'
import { UndiciOutboundFetch } from '../adapters/providers/undici-outbound-fetch.js'
import { BudgetAccounts, BudgetLedger, PriceTable, UNTRACKED_BUDGETS, UsageStore } from '../core/budgets.js'
import { LimitCoordination } from '../core/limits.js'
import { ExportStore, LogServices } from '../core/log-exports.js'
import { LogAnalytics } from '../core/logs.js'
import type { PipelineMember } from '../core/pipeline.js'
import type { GatewayPlugin } from '../core/plugin.js'
import { AdminStore, ChangeNotifier, CircuitBreaker, LogSink, OutboundFetch, ProviderRegistry, ResponseCache, SecretCipher, UpstreamClient } from '../core/ports.js'
import { RateLimiter } from '../core/rate-limits.js'
import { checkDeclaredPhases, ConfigError, resolvePlugins, type PluginResolution } from '../core/registry.js'
import type { RouteGroup } from '../core/routes.js'
import { Clock, Logger, type Service, type Token } from '../core/service.js'
import { BudgetBook } from '../plugins/budget/book.js'
import type { BudgetConfig } from '../plugins/budget/config.js'
import type { CacheConfig } from '../plugins/cache/config.js'
import { PLUGIN_CATALOGUE } from '../plugins/index.js'
import type { LoadedConfig } from './load.js'
import { loadPriceTable } from './pricing.js'

/** Everything boot needs, built but not started. */
export interface Wiring {
  readonly logger: Logger
  readonly resolution: PluginResolution
  /** Services to start, in start order (close in reverse). */
  readonly services: ReadonlyArray<{ readonly name: string; readonly service: Service }>
  /** Enabled plugins in priority order. */
  readonly plugins: readonly PipelineMember[]
  /** Pipeline members of each active route group. */
  readonly groups: ReadonlyMap<RouteGroup, readonly PipelineMember[]>
  /** The log sink, when an enabled plugin uses it (exposed for metrics and tests). */
  readonly logSink: LogSink | null
  /** Resolves a port (tests and diagnostics); only ports enabled plugins use are available. */
  resolve<T>(token: Token<T>): T
}

/** Names of port tokens, for messages and the service list. */
const PORT_NAMES = new Map<symbol, string>([
  [AdminStore, 'admin-store'],
  [LogSink, 'log-sink'],
  [ChangeNotifier, 'change-notifier'],
  [RateLimiter, 'rate-limiter'],
  [ResponseCache, 'response-cache'],
  [CircuitBreaker, 'circuit-breaker'],
  [ProviderRegistry, 'provider-registry'],
  [UpstreamClient, 'upstream-client'],
  [OutboundFetch, 'outbound-fetch'],
  [SecretCipher, 'secret-cipher'],
  [BudgetAccounts, 'budget-accounts'],
  [PriceTable, 'price-table'],
  [Clock, 'clock'],
  [Logger, 'logger'],
  [LogServices, 'log-services'],
  [LogAnalytics, 'log-analytics'],
])

function isService(value: unknown): value is Service {
  return (
    value !== null &&
    typeof value === 'object' &&
    typeof (value as Service).start === 'function' &&
    typeof (value as Service).close === 'function' &&
    typeof (value as Service).health === 'function'
  )
}

/**
 * The stores the environment names, each with its URL and its adapter classes (imported here, so
 * only then is the driver loaded); `null` when its URL is not set.
 */
async function loadOptionalStores({ mongodbUri, redisUrl, clickhouse }: LoadedConfig['environment']) {
  const [mongo, redis, clickhouseStore] = await Promise.all([
    mongodbUri === null
      ? null
      : Promise.all([import('../adapters/mongo/mongo-admin-store.js'), import('../adapters/mongo/mongo-usage-store.js')]).then(([admin, usage]) => ({
          uri: mongodbUri,
          MongoAdminStore: admin.MongoAdminStore,
          MongoUsageStore: usage.MongoUsageStore,
        })),
    redisUrl === null
      ? null
      : Promise.all([
          import('../adapters/redis/redis-budget-ledger.js'),
          import('../adapters/redis/redis-change-notifier.js'),
          import('../adapters/redis/redis-rate-limiter.js'),
          import('../adapters/redis/redis-response-cache.js'),
          import('../adapters/redis/redis-circuit-breaker.js'),
        ]).then(([ledger, notifier, limiter, responseCache, breaker]) => ({
          url: redisUrl,
          RedisBudgetLedger: ledger.RedisBudgetLedger,
          RedisChangeNotifier: notifier.RedisChangeNotifier,
          RedisRateLimiter: limiter.RedisRateLimiter,
          RedisResponseCache: responseCache.RedisResponseCache,
          RedisCircuitBreaker: breaker.RedisCircuitBreaker,
        })),
    clickhouse === null
      ? null
      : Promise.all([import('../adapters/clickhouse/clickhouse-log-analytics.js'), import('../adapters/clickhouse/clickhouse-log-sink.js')]).then(
          ([analytics, sink]) => ({ ...clickhouse, ClickHouseLogAnalytics: analytics.ClickHouseLogAnalytics, ClickHouseLogSink: sink.ClickHouseLogSink }),
        ),
  ])
  return { mongo, redis, clickhouse: clickhouseStore }
}

export async function wire(loaded: LoadedConfig): Promise<Wiring> {
  const { config, environment } = loaded
  const { mongo, redis, clickhouse } = await loadOptionalStores(environment)
  const resolution = resolvePlugins(PLUGIN_CATALOGUE, config.plugins)
  const logger = pino({ level: environment.logLevel, base: undefined })
  const container: DependencyContainer = rootContainer.createChildContainer()

  // Services in the order they must start; a factory appends its product when first resolved.
  const started: Array<{ name: string; service: Service }> = []
  function serviceFactory<T extends Service>(name: string, make: (c: DependencyContainer) => T) {
    return instanceCachingFactory<T>((c) => {
      const service = make(c)
      started.push({ name, service })
      return service
    })
  }
  const DATABASE = Symbol('DuckDbDatabase')

  container.register(Logger, { useValue: logger })
  container.register(Clock, { useValue: { now: () => Date.now() } })
  container.register(DATABASE, {
    useFactory: serviceFactory('embedded-database', () => new DuckDbDatabase({ path: join(environment.dataDir, 'gateway.duckdb'), memoryLimit: `${config.embedded.memoryLimitMb}MB` })),
  })
  // Service names tell /readyz which adapter runs. The embedded admin store keeps the plain
  // 'admin-store' name: it sits next to 'embedded-database', and test/e2e/lifecycle.test.ts checks it.
  if (mongo !== null) {
    container.register(AdminStore, { useFactory: serviceFactory('mongo-admin-store', () => new mongo.MongoAdminStore({ uri: mongo.uri })) })
  } else {
    container.register(AdminStore, {
      useFactory: serviceFactory('admin-store', (c) => new DuckDbAdminStore(c.resolve<DuckDbDatabase>(DATABASE))),
    })
  }
  if (clickhouse !== null) {
    container.register(LogSink, {
      useFactory: serviceFactory(
        'clickhouse-log-sink',
        () =>
          new clickhouse.ClickHouseLogSink({
            ...config.logSink,
            url: clickhouse.url,
            database: clickhouse.database,
            journalDirectory: join(environment.dataDir, 'log-journal', 'clickhouse'),
            logger,
          }),
      ),
    })
  } else {
    container.register(LogSink, {
      useFactory: serviceFactory('log-sink', (c) => new DuckDbLogSink(c.resolve<DuckDbDatabase>(DATABASE), { ...config.logSink, logger })),
    })
  }
  // The read side follows the sink: both on ClickHouse when CLICKHOUSE_URL is set, else both on
  // the embedded file.
  if (clickhouse !== null) {
    container.register(LogAnalytics, {
      useFactory: serviceFactory('clickhouse-log-analytics', () => new clickhouse.ClickHouseLogAnalytics({ url: clickhouse.url, database: clickhouse.database })),
    })
  } else {
    container.register(LogAnalytics, {
      useFactory: serviceFactory('log-analytics', (c) => new DuckDbLogAnalytics(c.resolve<DuckDbDatabase>(DATABASE))),
    })
  }
  if (redis !== null) {
    container.register(ChangeNotifier, {
      useFactory: serviceFactory('redis-change-notifier', () => new redis.RedisChangeNotifier({ url: redis.url, logger })),
    })
  } else {
    container.register(ChangeNotifier, {
      useFactory: serviceFactory('in-process-change-notifier', () => new InProcessChangeNotifier({ logger })),
    })
  }
  if (redis !== null) {
    container.register(RateLimiter, {
      useFactory: serviceFactory('redis-rate-limiter', () => new redis.RedisRateLimiter({ url: redis.url })),
    })
  } else {
    container.register(RateLimiter, { useFactory: serviceFactory('in-process-rate-limiter', () => new InProcessRateLimiter()) })
  }
  // Circuit breakers of config targets (forward's router): shared through Redis, else per process.
  container.register(CircuitBreaker, {
    useFactory:
      redis !== null
        ? serviceFactory<CircuitBreaker>('redis-circuit-breaker', () => new redis.RedisCircuitBreaker({ url: redis.url, logger }))
        : serviceFactory<CircuitBreaker>('in-process-circuit-breaker', () => new InProcessCircuitBreaker()),
  })
  // The response cache exists only while the cache plugin is enabled (its bounds are the plugin's).
  const cachePlugin = resolution.enabled.find((entry) => entry.definition.name === 'cache')
  if (cachePlugin !== undefined) {
    const cacheConfig = cachePlugin.config as CacheConfig
    container.register(ResponseCache, {
      useFactory:
        redis !== null
          ? serviceFactory<ResponseCache>('redis-response-cache', () => new redis.RedisResponseCache({ url: redis.url, commandTimeoutMs: cacheConfig.redisCommandTimeoutMs }))
          : serviceFactory<ResponseCache>('in-process-response-cache', (c) => new InProcessResponseCache({ maxBytes: cacheConfig.maxBytes, clock: c.resolve<Clock>(Clock) })),
    })
  }
  container.register(ProviderRegistry, {
    useFactory: instanceCachingFactory(() => new TableProviderRegistry({ allowedCustomHosts: environment.allowedCustomHosts })),
  })
  const isAddressAllowed = connectAddressPolicy(parseAllowList(environment.allowedCustomHosts))
  container.register(UpstreamClient, {
    useFactory: serviceFactory('upstream-client', () => new UndiciUpstreamClient({ ...config.upstream, isAddressAllowed })),
  })
  container.register(OutboundFetch, {
    useFactory: serviceFactory('outbound-fetch', () => new UndiciOutboundFetch({ isAddressAllowed, connectTimeoutMs: config.upstream.connectTimeoutMs })),
  })

  // All limits in one round trip: when the budget plugin runs after rate-limit and both live in
  // Redis, the budget ledger's script also checks the rate-limit buckets (see LimitCoordination).
  const rateLimitEntry = resolution.enabled.find((entry) => entry.definition.name === 'rate-limit')
  const budgetEntry = resolution.enabled.find((entry) => entry.definition.name === 'budget')
  container.register(LimitCoordination, {
    useValue: {
      rateLimitsRideWithBudget:
        redis !== null && rateLimitEntry !== undefined && budgetEntry !== undefined && budgetEntry.priority < rateLimitEntry.priority,
    },
  })

  // Budgets: ledger (Redis or in process), usage store (MongoDB or the DuckDB file), the book over
  // them and the price table exist only while the budget plugin is enabled; otherwise the Admin
  // API shows untracked budgets.
  const budgetPlugin = resolution.enabled.find((entry) => entry.definition.name === 'budget')
  if (budgetPlugin !== undefined) {
    const budgetConfig = budgetPlugin.config as BudgetConfig
    container.register(BudgetLedger, {
      useFactory:
        redis !== null
          ? serviceFactory<BudgetLedger>('redis-budget-ledger', () => new redis.RedisBudgetLedger({ url: redis.url, leaseMs: budgetConfig.reservationLeaseMs }))
          : serviceFactory<BudgetLedger>('in-process-budget-ledger', () => new InProcessBudgetLedger()),
    })
    container.register(UsageStore, {
      useFactory:
        mongo !== null
          ? serviceFactory<UsageStore>('mongo-usage-store', () => new mongo.MongoUsageStore({ uri: mongo.uri }))
          : serviceFactory<UsageStore>('embedded-usage-store', (c) => new DuckDbUsageStore(c.resolve<DuckDbDatabase>(DATABASE))),
    })
    container.register(BudgetAccounts, {
      useFactory: serviceFactory(
        'budget-book',
        (c) =>
          new BudgetBook({
            ledger: c.resolve<BudgetLedger>(BudgetLedger),
            store: c.resolve<UsageStore>(UsageStore),
            notifier: c.resolve<ChangeNotifier>(ChangeNotifier),
            clock: c.resolve<Clock>(Clock),
            logger,
            persistIntervalMs: budgetConfig.persistIntervalMs,
          }),
      ),
    })
    container.register(PriceTable, { useValue: loadPriceTable({ file: budgetConfig.pricingFile, overlay: budgetConfig.prices }) })
  } else {
    container.register(BudgetAccounts, { useValue: UNTRACKED_BUDGETS })
    // The log plugin prices requests too; without the budget plugin it uses the shipped table.
    container.register(PriceTable, { useValue: loadPriceTable() })
  }

  // The Admin API's analytics, feedback, custom logs and exports use the log store only while the
  // log plugin is enabled; otherwise they get no ports (and answer GW_LOGS_DISABLED), so turning
  // `log` off still means the log store is never opened.
  container.register(ExportStore, {
    useFactory: serviceFactory('export-store', () => new FileExportStore({ dir: join(environment.dataDir, 'exports'), logger })),
  })
  const logEnabled = resolution.enabled.some((entry) => entry.definition.name === 'log')
  container.register(LogServices, {
    useFactory: instanceCachingFactory<LogServices | null>((c) =>
      logEnabled
        ? { analytics: c.resolve<LogAnalytics>(LogAnalytics), sink: c.resolve<LogSink>(LogSink), exports: c.resolve<ExportStore>(ExportStore) }
        : null,
    ),
  })

  // The master key is resolved (and on a first embedded start, its key file created) only when an
  // enabled plugin seals or opens provider credentials.
  container.register(SecretCipher, {
    useFactory: instanceCachingFactory(() => {
      try {
        const resolved = resolveMasterKey({ envValue: environment.masterKey, dataDir: environment.dataDir, embeddedStore: mongo === null })
        if (resolved.created) logger.warn({ path: resolved.source }, 'created the master key file that encrypts provider credentials: back it up, without it they cannot be opened')
        return new AesGcmSecretCipher(resolved.key)
      } catch (error) {
        if (error instanceof MasterKeyError) throw new ConfigError(error.source, error.detail)
        throw error
      }
    }),
  })

  const plugins: PipelineMember[] = []
  for (const enabled of resolution.enabled) {
    const deps = enabled.definition.inject.map((token) => {
      if (!container.isRegistered(token)) throw new Error(`plugin "${enabled.definition.name}" injects an unregistered port ${String(token)}`)
      return container.resolve(token)
    })
    const plugin: GatewayPlugin = enabled.definition.create(enabled.config, deps)
    checkDeclaredPhases(enabled.definition, plugin)
    plugins.push({ name: enabled.definition.name, plugin })
  }

  const groups = new Map<RouteGroup, PipelineMember[]>()
  for (const group of resolution.activeGroups) {
    groups.set(
      group,
      plugins.filter((member, index) => resolution.enabled[index]?.definition.groups.includes(group)),
    )
  }

  const injected = new Set<symbol>(resolution.enabled.flatMap((plugin) => plugin.definition.inject))
  return {
    logger,
    resolution,
    services: started.filter((entry) => isService(entry.service)),
    plugins,
    groups,
    logSink: injected.has(LogSink) ? container.resolve(LogSink) : null,
    resolve<T>(token: Token<T>): T {
      if (!injected.has(token)) throw new Error(`port ${PORT_NAMES.get(token) ?? String(token)} is not used by any enabled plugin`)
      return container.resolve<T>(token)
    },
  }
}
