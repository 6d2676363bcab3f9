/**
 * The plugin catalogue: every plugin the gateway can load, in no particular order (the config
 * decides which are enabled and core/registry.ts orders them by priority).
 */
import type { PluginDefinition } from '../core/plugin.js'
import { adminApi } from './admin-api/index.js'
import { audit } from './audit/index.js'
import { auth } from './auth/index.js'
import { budget } from './budget/index.js'
import { cache } from './cache/index.js'
import { forward } from './forward/index.js'
import { log } from './log/index.js'
import { promptRender } from './prompt-render/index.js'
import { rateLimit } from './rate-limit/index.js'
import { routing } from './routing/index.js'
import { scopeCheck } from './scope-check/index.js'
import { virtualKey } from './virtual-key/index.js'

export const PLUGIN_CATALOGUE: readonly PluginDefinition[] = [
  auth,
  scopeCheck,
  virtualKey,
  routing,
  promptRender,
  forward,
  log,
  rateLimit,
  budget,
  cache,
  adminApi,
  audit,
] as readonly PluginDefinition[]
