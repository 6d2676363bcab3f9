/**
 * log: one record per request.
 * Phases: onLog (priority 10; after forward's onLog filled `ctx.usage`). Reads the finished context
 * (caller, target, model, usage, error, timings, virtual key, `ctx.metadata` as core checked it,
 * and the bodies when configured; for a config-routed request `ctx.routing`, `ctx.attempts` and
 * `ctx.attempt`, see record.ts); writes nothing to it.
 * I/O: enqueue only (the LogSink batches writes off the request path); the cost is looked up in the
 * in-process price table.
 * Failure policy: never changes a reply and never throws; the sink journals what it cannot write
 * and counts anything it loses.
 */
import type { PriceTable } from '../../core/budgets.js'
import type { RequestContext } from '../../core/context.js'
import type { GatewayPlugin } from '../../core/plugin.js'
import type { LogSink } from '../../core/ports.js'
import type { LogConfig } from './config.js'
import { toLogRecord, type RecordOptions } from './record.js'

export class LogPlugin implements GatewayPlugin {
  readonly #sink: LogSink
  readonly #options: RecordOptions

  constructor(config: LogConfig, sink: LogSink, prices: PriceTable) {
    this.#sink = sink
    this.#options = {
      maxMetadataBytes: config.maxMetadataBytes,
      prices,
      maxBodyBytes: config.bodies.enabled ? config.bodies.maxBytes : null,
    }
  }

  onLog(ctx: RequestContext): void {
    this.#sink.enqueue(toLogRecord(ctx, this.#options))
  }
}
