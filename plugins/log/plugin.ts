/**
 * log: one record per request.
 * Phases: onLog (priority 10; after forward's onLog filled `ctx.usage`). Reads the finished context;
 * writes nothing to it.
 * I/O: enqueue only (the LogSink batches writes off the request path).
 * Failure policy: never changes a reply; the sink counts anything it loses.
 */
import type { RequestContext } from '../../core/context.js'
import type { GatewayPlugin } from '../../core/plugin.js'
import type { LogSink } from '../../core/ports.js'
import type { LogConfig } from './config.js'
import { toLogRecord } from './record.js'

export class LogPlugin implements GatewayPlugin {
  readonly #config: LogConfig
  readonly #sink: LogSink

  constructor(config: LogConfig, sink: LogSink) {
    this.#config = config
    this.#sink = sink
  }

  onLog(ctx: RequestContext): void {
    this.#sink.enqueue(toLogRecord(ctx, this.#config.maxMetadataBytes))
  }
}
