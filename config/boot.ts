/**
 * Start and stop order. Start: load config → wire → start services (in dependency order) → start
 * plugins → compile pipelines → listen. Stop: stop accepting → drain in-flight requests (bounded by
 * `server.shutdownGraceMs`) → close plugins → close services in reverse (the log sink flushes).
 */
import { mkdirSync } from 'node:fs'
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client'
import { HttpServer } from '../core/http/server.js'
import { Pipeline } from '../core/pipeline.js'
import { RouteTable, type RouteGroup } from '../core/routes.js'
import type { Service } from '../core/service.js'
import { loadConfig, type Environment } from './load.js'
import type { GatewayConfig } from './schema.js'
import { wire, type Wiring } from './wiring.js'

export interface GatewayHandle {
  readonly port: number
  /** `http://127.0.0.1:<port>` */
  readonly url: string
  readonly config: GatewayConfig
  readonly wiring: Wiring
  /** Graceful shutdown; safe to call more than once. */
  stop(): Promise<void>
}

export interface StartOptions {
  /** Environment variables (defaults to `process.env`). */
  readonly env?: Environment
  /** A config overlay applied after `GATEWAY_CONFIG` (used by tests). */
  readonly overlay?: unknown
}

async function closeAll(services: ReadonlyArray<{ name: string; service: Service }>, wiring: Wiring): Promise<void> {
  for (const { name, service } of [...services].reverse()) {
    try {
      await service.close()
    } catch (error) {
      wiring.logger.error({ err: error, service: name }, 'closing a service failed')
    }
  }
}

function metricsRegistry(wiring: Wiring, server: () => HttpServer | null): Registry {
  const registry = new Registry()
  collectDefaultMetrics({ register: registry })
  new Gauge({
    name: 'gw_http_in_flight_requests',
    help: 'Requests being processed',
    registers: [registry],
    collect() {
      this.set(server()?.inFlight ?? 0)
    },
  })
  const sink = wiring.logSink
  if (sink !== null) {
    const stat = (name: string, help: string, read: () => number) =>
      new Gauge({
        name,
        help,
        registers: [registry],
        collect() {
          this.set(read())
        },
      })
    // The sink's totals only grow, so they are exposed as counters (rate() works on them).
    const total = (name: string, help: string, read: () => number) => {
      let reported = 0
      return new Counter({
        name,
        help,
        registers: [registry],
        collect() {
          const now = read()
          if (now > reported) this.inc(now - reported)
          reported = Math.max(reported, now)
        },
      })
    }
    stat('gw_log_queue_records', 'Log records waiting to be written', () => sink.stats().queued)
    stat('gw_log_journaled_records', 'Log records in the on-disk journal, waiting for the log store to come back', () => sink.stats().journaled)
    total('gw_log_written_records_total', 'Log records written to the log store', () => sink.stats().written)
    total('gw_log_dropped_records_total', 'Log records lost (queue overflow, full journal, unrepresentable records)', () => sink.stats().dropped)
  }
  return registry
}

export async function startGateway(options: StartOptions = {}): Promise<GatewayHandle> {
  const loaded = loadConfig(options.env ?? process.env, options.overlay)
  // The embedded store's directory is made owner-only (0700) before anything is put in it: wiring
  // may create the master key file there first. A directory that exists keeps its mode.
  if (loaded.environment.mongodbUri === null) mkdirSync(loaded.environment.dataDir, { recursive: true, mode: 0o700 })
  const wiring = await wire(loaded)
  const { config } = loaded
  const logger = wiring.logger

  const running: Array<{ name: string; service: Service }> = []
  try {
    for (const entry of wiring.services) {
      await entry.service.start()
      running.push(entry)
    }
    for (const member of wiring.plugins) await member.plugin.start?.()
  } catch (error) {
    await closeAll(running, wiring)
    throw error
  }

  const pipelines: Partial<Record<RouteGroup, Pipeline>> = {}
  for (const [group, members] of wiring.groups) {
    pipelines[group] = new Pipeline(group, group === 'admin' ? 'control' : 'data', members, logger)
  }
  let server: HttpServer | null = null
  const registry = metricsRegistry(wiring, () => server)
  server = new HttpServer({
    host: config.server.host,
    port: config.server.port,
    maxJsonBodyBytes: config.server.maxJsonBodyBytes,
    maxUploadBodyBytes: config.server.maxUploadBodyBytes,
    routes: new RouteTable(),
    pipelines,
    logger,
    metrics: () => registry.metrics(),
    readiness: async () => {
      const checks: Record<string, { ok: boolean; detail?: string }> = {}
      let ok = true
      for (const { name, service } of running) {
        const health = await service.health().catch((error: unknown) => ({ ok: false, detail: (error as Error).message }))
        checks[name] = health
        ok &&= health.ok
      }
      return { ok, checks }
    },
  })
  let port: number
  try {
    port = await server.listen()
  } catch (error) {
    await closeAll(running, wiring)
    throw error
  }
  logger.info({ port, plugins: wiring.plugins.map((member) => member.name) }, 'gateway listening')
  if (wiring.resolution.inactiveGroups.length > 0) {
    logger.warn({ groups: wiring.resolution.inactiveGroups }, 'route groups switched off (their terminal plugin is disabled): their routes answer 404')
  }

  let stopping: Promise<void> | null = null
  const httpServer = server
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    config,
    wiring,
    stop() {
      stopping ??= (async () => {
        httpServer.stopAccepting()
        const drained = await httpServer.drain(config.server.shutdownGraceMs)
        if (!drained) logger.warn({ inFlight: httpServer.inFlight }, 'shutdown deadline passed with requests in flight')
        for (const member of [...wiring.plugins].reverse()) {
          try {
            await member.plugin.close?.()
          } catch (error) {
            logger.error({ err: error, plugin: member.name }, 'closing a plugin failed')
          }
        }
        await closeAll(running, wiring)
        logger.info({}, 'gateway stopped')
      })()
      return stopping
    },
  }
}
