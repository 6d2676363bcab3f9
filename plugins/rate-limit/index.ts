import { LimitCoordination } from '../../core/limits.js'
import { definePlugin } from '../../core/plugin.js'
import { RateLimiter } from '../../core/rate-limits.js'
import { Clock, Logger } from '../../core/service.js'
import { rateLimitConfigSchema } from './config.js'
import { RateLimitPlugin } from './plugin.js'

export const rateLimit = definePlugin({
  name: 'rate-limit',
  priority: 700,
  groups: ['inference', 'passthrough'],
  phases: ['onAccess', 'onAttempt', 'onAttemptEnd', 'onLog'],
  configSchema: rateLimitConfigSchema,
  inject: [RateLimiter, Clock, Logger, LimitCoordination],
  create: (config, [limiter, clock, logger, coordination]) => new RateLimitPlugin(config, limiter, clock, logger, coordination),
})
