import { LimitCoordination } from '../../core/limits.js'
import { definePlugin } from '../../core/plugin.js'
import { RateLimiter } from '../../core/rate-limits.js'
import { Clock, Logger } from '../../core/service.js'
import { rateLimitConfigSchema, type RateLimitConfig } from './config.js'
import { RateLimitPlugin } from './plugin.js'

export const rateLimit = definePlugin<RateLimitConfig>({
  name: 'rate-limit',
  priority: 700,
  groups: ['inference', 'passthrough'],
  phases: ['onAccess', 'onLog'],
  configSchema: rateLimitConfigSchema,
  inject: [RateLimiter, Clock, Logger, LimitCoordination],
  create: (config, deps) => new RateLimitPlugin(config, deps[0] as RateLimiter, deps[1] as Clock, deps[2] as Logger, deps[3] as LimitCoordination),
})
