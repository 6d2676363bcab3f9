/**
 * Budgets end to end: the real gateway (uWS, real sockets) with a mock provider that reports token
 * usage, keys and limits made through the Admin API, requests through plain HTTP and the openai
 * client. Embedded mode (in-process ledger, DuckDB usage store) with a restart on the same data
 * directory, and Redis mode with the budget keys deleted (as by a flush) mid-way.
 */
import { createHash, randomUUID } from 'node:crypto'
import { rmSync } from 'node:fs'
import { Redis } from 'ioredis'
import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest'
import { RESERVE_SCRIPT, SETTLE_SCRIPT } from '../../adapters/redis/redis-budget-ledger.js'
import { ACQUIRE_SCRIPT } from '../../adapters/redis/redis-rate-limiter.js'
import { startGateway, type GatewayHandle } from '../../config/boot.js'
import { postChat, TEST_ADMIN_KEY, startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { MOCK_USAGE, startMockUpstream, type MockUpstream } from '../helpers/mock-upstream.js'

const WAIT = { timeout: 10_000, interval: 20 }
const PER_REQUEST = MOCK_USAGE.total_tokens
const BODY = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 10 }

let mock: MockUpstream

beforeAll(async () => {
  mock = await startMockUpstream()
})

afterAll(async () => {
  await mock?.close()
})

interface Caller {
  readonly url: string
  admin(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }>
}

function callerOf(handle: GatewayHandle): Caller {
  return {
    url: handle.url,
    async admin(method, path, body) {
      const response = await fetch(`${handle.url}${path}`, {
        method,
        headers: { 'x-gateway-api-key': TEST_ADMIN_KEY, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      })
      const text = await response.text()
      return { status: response.status, body: text.length > 0 ? JSON.parse(text) : null }
    },
  }
}

async function chat(caller: Caller, key: string): Promise<{ status: number; body: any }> {
  const response = await postChat(caller.url, key, mock.url, {}, BODY)
  return { status: response.status, body: await response.json() }
}

/** A workspace and a service key with a token budget. */
async function budgetedKey(caller: Caller, usageLimits: Record<string, unknown>): Promise<{ key: string; keyId: string; workspace: string }> {
  const workspace = await caller.admin('POST', '/v1/admin/workspaces', { name: `budget-${randomUUID().slice(0, 6)}` })
  expect(workspace.status).toBe(200)
  const created = await caller.admin('POST', '/v1/api-keys/workspace/service', {
    name: 'budgeted',
    workspace_id: workspace.body.id,
    scopes: ['completions.write'],
    usage_limits: usageLimits,
  })
  expect(created.status).toBe(200)
  return { key: created.body.key, keyId: created.body.id, workspace: workspace.body.id }
}

async function usageOf(caller: Caller, keyId: string): Promise<any> {
  const key = await caller.admin('GET', `/v1/api-keys/${keyId}`)
  expect(key.status).toBe(200)
  return key.body
}

/** Sends requests one at a time (each settled before the next) until one is refused; returns the successes. */
async function spendUntilRefused(caller: Caller, key: string, keyId: string, startUsage: number): Promise<{ successes: number; refusal: any }> {
  let successes = 0
  for (let attempt = 0; attempt < 50; attempt++) {
    const reply = await chat(caller, key)
    if (reply.status !== 200) {
      expect(reply.status).toBe(412)
      return { successes, refusal: reply.body }
    }
    successes++
    await vi.waitFor(async () => expect((await usageOf(caller, keyId)).usage_limits.current_usage).toBe(startUsage + successes * PER_REQUEST), WAIT)
  }
  throw new Error('never refused')
}

describe('budgets (embedded: in-process ledger, DuckDB usage store)', () => {
  let gw: TestGateway
  let restarted: GatewayHandle | null = null

  beforeAll(async () => {
    gw = await startTestGateway()
  })

  afterAll(async () => {
    await restarted?.stop()
    await gw?.stop()
    if (gw !== undefined) rmSync(gw.dataDir, { recursive: true, force: true })
  })

  it('counts tokens until the key is exhausted, answers 412, shows it in the Admin API, resets, and survives a restart', async () => {
    const caller = callerOf(gw)
    const { key, keyId } = await budgetedKey(caller, { type: 'tokens', credit_limit: 100, alert_threshold: 50 })
    const fresh = await usageOf(caller, keyId)
    expect(fresh.status).toBe('active')
    expect(fresh.usage_limits).toMatchObject({ type: 'tokens', credit_limit: 100, current_usage: 0, last_reset_at: null, status: 'active' })

    // A request is admitted while usage is below the limit: 6 × 16 = 96 < 100 lets a 7th through.
    const { successes, refusal } = await spendUntilRefused(caller, key, keyId, 0)
    expect(successes).toBe(7)
    expect(refusal.error).toMatchObject({ type: 'budget_exceeded_error', code: 'GW_BUDGET_EXHAUSTED', param: null })
    expect(refusal.error.message).toContain(`API key ${fresh.key}`)
    expect(refusal.error.message).toContain('112 of its 100 tokens')
    expect(refusal.error.message).not.toContain(key)

    // The openai client sees the same refusal.
    const client = new OpenAI({
      apiKey: 'sk-provider',
      baseURL: `${gw.url}/v1`,
      maxRetries: 0,
      defaultHeaders: { 'x-gateway-api-key': key, 'x-gateway-provider': 'openai', 'x-gateway-custom-host': mock.url },
    })
    const error = await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Hi' }] }).catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(OpenAI.APIError)
    expect((error as InstanceType<typeof OpenAI.APIError>).status).toBe(412)
    expect((error as InstanceType<typeof OpenAI.APIError>).type).toBe('budget_exceeded_error')

    const exhausted = await usageOf(caller, keyId)
    expect(exhausted.status).toBe('exhausted')
    expect(exhausted.usage_limits).toMatchObject({ current_usage: 112, status: 'exhausted', last_reset_at: null })
    const listed = await caller.admin('GET', `/v1/api-keys?workspace_id=${exhausted.workspace_id}`)
    expect(listed.body.data.find((entry: any) => entry.id === keyId)).toMatchObject({ status: 'exhausted', usage_limits: { current_usage: 112 } })

    // The threshold alert and the exhaustion were each recorded once.
    await vi.waitFor(async () => {
      const audit = await caller.admin('GET', '/v1/audit-logs?resource_type=budget')
      const mine = audit.body.data.filter((entry: any) => entry.resource_id === keyId)
      expect(mine.map((entry: any) => entry.action).sort()).toEqual(['alert', 'exhausted'])
    }, WAIT)

    const reset = await caller.admin('PUT', `/v1/api-keys/${keyId}`, { reset_usage: true })
    expect(reset.status).toBe(200)
    expect(reset.body.status).toBe('active')
    expect(reset.body.usage_limits).toMatchObject({ current_usage: 0, status: 'active' })
    const resetAt = reset.body.usage_limits.last_reset_at as string
    expect(Date.parse(resetAt)).toBeGreaterThan(Date.now() - 60_000)

    expect((await chat(caller, key)).status).toBe(200)
    await vi.waitFor(async () => expect((await usageOf(caller, keyId)).usage_limits.current_usage).toBe(PER_REQUEST), WAIT)

    // Restart on the same data directory: the usage is still there and keeps counting.
    await gw.stop()
    restarted = await startGateway({
      env: {
        PORT: '0',
        GATEWAY_DATA_DIR: gw.dataDir,
        GATEWAY_BOOTSTRAP_ADMIN_KEY: TEST_ADMIN_KEY,
        GATEWAY_ALLOWED_CUSTOM_HOSTS: '127.0.0.1',
        GATEWAY_LOG_LEVEL: 'silent',
      },
      overlay: { server: { host: '127.0.0.1' } },
    })
    const again = callerOf(restarted)
    const afterRestart = await usageOf(again, keyId)
    expect(afterRestart.usage_limits).toMatchObject({ current_usage: PER_REQUEST, last_reset_at: resetAt, status: 'active' })
    const more = await spendUntilRefused(again, key, keyId, PER_REQUEST)
    expect(more.successes).toBe(6)
    expect((await usageOf(again, keyId)).status).toBe('exhausted')
  })

  it('applies a workspace budget to all of its keys together and shows it on the workspace', async () => {
    const caller = callerOf(restarted ?? gw)
    const workspace = await caller.admin('POST', '/v1/admin/workspaces', {
      name: `ws-budget-${randomUUID().slice(0, 6)}`,
      usage_limits: [{ type: 'tokens', credit_limit: 40, periodic_reset: 'monthly' }],
    })
    expect(workspace.status).toBe(200)
    const keys = []
    for (const name of ['one', 'two']) {
      const created = await caller.admin('POST', '/v1/api-keys/workspace/service', { name, workspace_id: workspace.body.id, scopes: ['completions.write'] })
      keys.push(created.body.key as string)
    }
    expect((await chat(caller, keys[0] as string)).status).toBe(200)
    await vi.waitFor(async () => {
      const shown = await caller.admin('GET', `/v1/admin/workspaces/${workspace.body.id}`)
      expect(shown.body.usage_limits[0]).toMatchObject({ current_usage: PER_REQUEST, status: 'active' })
    }, WAIT)
    expect((await chat(caller, keys[1] as string)).status).toBe(200)
    await vi.waitFor(async () => {
      const shown = await caller.admin('GET', `/v1/admin/workspaces/${workspace.body.id}`)
      expect(shown.body.usage_limits[0].current_usage).toBe(2 * PER_REQUEST)
    }, WAIT)
    expect((await chat(caller, keys[0] as string)).status).toBe(200)
    await vi.waitFor(async () => {
      const shown = await caller.admin('GET', `/v1/admin/workspaces/${workspace.body.id}`)
      expect(shown.body.usage_limits[0]).toMatchObject({ current_usage: 3 * PER_REQUEST, status: 'exhausted' })
      const startOfMonth = new Date()
      expect(shown.body.usage_limits[0].last_reset_at).toBe(new Date(Date.UTC(startOfMonth.getUTCFullYear(), startOfMonth.getUTCMonth(), 1)).toISOString())
    }, WAIT)
    const refused = await chat(caller, keys[1] as string)
    expect(refused.status).toBe(412)
    expect(refused.body.error.message).toContain(`workspace ${workspace.body.slug}`)
  })
})

/**
 * Waves of 100 concurrent requests against a cost budget until a whole wave is refused. Each gpt-4o
 * request reserves its worst case (prompt ≈ bytes / 4 at $2.50/M + 10 output tokens at $10/M) and
 * really costs the mock's usage (11 prompt + 5 completion tokens): 77 500 nano-USD.
 */
async function costBudgetUnderConcurrency(caller: Caller): Promise<void> {
  const limitUsd = 0.002
  const actualNano = 11 * 2.5 * 1000 + 5 * 10 * 1000
  const body = { model: 'gpt-4o', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 10 }
  const worstNano = Math.ceil(Math.ceil(JSON.stringify(body).length / 4) * 2.5 * 1000 + 10 * 10 * 1000)
  const { key, keyId } = await budgetedKey(caller, { type: 'cost', credit_limit: limitUsd })
  const send = async (): Promise<number> => {
    const response = await fetch(`${caller.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-gateway-api-key': key, 'x-gateway-provider': 'openai', 'x-gateway-custom-host': mock.url, authorization: 'Bearer sk-provider' },
      body: JSON.stringify(body),
    })
    await response.arrayBuffer()
    return response.status
  }
  let successes = 0
  let refusals = 0
  for (let wave = 0; wave < 20; wave++) {
    const statuses = await Promise.all(Array.from({ length: 100 }, send))
    expect(statuses.every((status) => status === 200 || status === 412)).toBe(true)
    const ok = statuses.filter((status) => status === 200).length
    successes += ok
    refusals += statuses.length - ok
    // Every success is charged its real cost once settled.
    await vi.waitFor(async () => expect((await usageOf(caller, keyId)).usage_limits.current_usage * 1e9).toBeCloseTo(successes * actualNano, 0), WAIT)
    if (ok === 0) break
  }
  const final = await usageOf(caller, keyId)
  const usedNano = final.usage_limits.current_usage * 1e9
  expect(refusals).toBeGreaterThan(0)
  expect(usedNano).toBeGreaterThanOrEqual(limitUsd * 1e9)
  expect(usedNano).toBeLessThanOrEqual(limitUsd * 1e9 + worstNano)
  expect(final.status).toBe('exhausted')
  expect(final.usage_limits.status).toBe('exhausted')
  expect(await send()).toBe(412)
}

describe('budgets under concurrency', () => {
  it('in process: 100 concurrent requests never take a cost budget past limit + one worst case, and it ends exhausted (412)', async () => {
    const gw = await startTestGateway()
    try {
      await costBudgetUnderConcurrency(callerOf(gw))
    } finally {
      await gw.close()
    }
  })

  it('on Redis: the same', async () => {
    const gw = await startTestGateway({ env: { REDIS_URL: inject('redisUrl') } })
    try {
      await costBudgetUnderConcurrency(callerOf(gw))
    } finally {
      await gw.close()
    }
  })
})

describe('budgets (Redis ledger)', () => {
  let gw: TestGateway
  let redis: Redis

  beforeAll(async () => {
    gw = await startTestGateway({ env: { REDIS_URL: inject('redisUrl') } })
    redis = new Redis(inject('redisUrl'), { lazyConnect: true, maxRetriesPerRequest: 1 })
  })

  afterAll(async () => {
    await redis?.quit()
    await gw?.close()
  })

  it('keeps every token across a flush of the budget keys', async () => {
    const caller = callerOf(gw)
    const { key, keyId } = await budgetedKey(caller, { type: 'tokens', credit_limit: 100, periodic_reset: 'weekly' })
    for (let index = 1; index <= 3; index++) {
      expect((await chat(caller, key)).status).toBe(200)
      await vi.waitFor(async () => expect((await usageOf(caller, keyId)).usage_limits.current_usage).toBe(index * PER_REQUEST), WAIT)
    }
    const keys = await redis.keys(`gw:budget:*:api-key:${keyId}:*`)
    expect(keys).toHaveLength(1)
    expect(keys[0]).toMatch(/^gw:budget:\{[0-9a-f-]{36}\}:api-key:/)
    // What FLUSHALL or a Redis restart does to these counters (without touching other tests' keys).
    await redis.del(...keys)

    const afterFlush = await usageOf(caller, keyId)
    expect(afterFlush.usage_limits.current_usage).toBe(3 * PER_REQUEST)
    const { successes } = await spendUntilRefused(caller, key, keyId, 3 * PER_REQUEST)
    expect(successes).toBe(4)
    expect(await redis.hget(keys[0] as string, 'u')).toBe(String(7 * PER_REQUEST))
    expect((await usageOf(caller, keyId)).status).toBe('exhausted')
  })
})

describe('rate limits and budgets together (Redis)', () => {
  it('checks both in one ledger script per request (no rate-limiter script), still answering 429', async () => {
    const gw = await startTestGateway({ env: { REDIS_URL: inject('redisUrl') } })
    const redis = new Redis(inject('redisUrl'), { lazyConnect: true, maxRetriesPerRequest: 1 })
    const monitor = await redis.monitor()
    try {
      const caller = callerOf(gw)
      const workspace = await caller.admin('POST', '/v1/admin/workspaces', { name: `both-${randomUUID().slice(0, 6)}` })
      const created = await caller.admin('POST', '/v1/api-keys/workspace/service', {
        name: 'both',
        workspace_id: workspace.body.id,
        scopes: ['completions.write'],
        rate_limits: [{ type: 'requests', unit: 'rpm', value: 3 }],
        usage_limits: { type: 'tokens', credit_limit: 1_000_000 },
      })
      expect(created.status).toBe(200)
      // Every script call on this key's counters or buckets, by script (other test files share the Redis server).
      const keyId = String(created.body.id)
      const sha = (source: string): string => createHash('sha1').update(source).digest('hex')
      const names = new Map([
        [sha(ACQUIRE_SCRIPT), 'acquire'],
        [sha(RESERVE_SCRIPT), 'reserve'],
        [sha(SETTLE_SCRIPT), 'settle'],
      ])
      const scripts = new Map<string, number>()
      monitor.on('monitor', (_time: string, args: string[]) => {
        if (!/^evalsha$/i.test(args[0] ?? '') || !args.slice(3).some((arg) => arg.includes(keyId))) return
        const name = names.get(args[1] ?? '') ?? 'other'
        scripts.set(name, (scripts.get(name) ?? 0) + 1)
      })

      const statuses: number[] = []
      for (let index = 0; index < 4; index++) statuses.push((await chat(caller, created.body.key)).status)
      expect(statuses).toEqual([200, 200, 200, 429])
      await vi.waitFor(async () => expect((await usageOf(caller, created.body.id)).usage_limits.current_usage).toBe(3 * PER_REQUEST), WAIT)
      // One call per request before forwarding (the first one twice: its counter was seeded in between).
      expect(scripts.get('reserve')).toBe(5)
      expect(scripts.get('acquire') ?? 0).toBe(0)
      // Settlements ride on the next request's call, or go alone when none comes within 20 ms.
      expect(scripts.get('settle') ?? 0).toBeLessThanOrEqual(3)
    } finally {
      monitor.disconnect()
      redis.disconnect()
      await gw.close()
    }
  })
})

describe('budgets switched off', () => {
  it('never builds the ledger or the usage store, and shows limits without usage', async () => {
    const gw = await startTestGateway({ overlay: { plugins: { budget: { enabled: false } } } })
    try {
      const names = gw.wiring.services.map((entry) => entry.name)
      expect(names).not.toContain('budget-book')
      expect(names).not.toContain('embedded-usage-store')
      expect(names).not.toContain('in-process-budget-ledger')
      const caller = callerOf(gw)
      const { key, keyId } = await budgetedKey(caller, { type: 'tokens', credit_limit: 1 })
      expect((await chat(caller, key)).status).toBe(200)
      expect((await chat(caller, key)).status).toBe(200)
      const shown = await usageOf(caller, keyId)
      expect(shown.status).toBe('active')
      expect(shown.usage_limits).toEqual({ type: 'tokens', credit_limit: 1, alert_threshold: null, periodic_reset: null, periodic_reset_days: null })
    } finally {
      await gw.close()
    }
  })

  it('lists the budget services in /readyz when on', async () => {
    const gw = await startTestGateway()
    try {
      const ready = (await (await fetch(`${gw.url}/readyz`)).json()) as { checks: Record<string, unknown> }
      expect(ready.checks).toMatchObject({ 'in-process-budget-ledger': { ok: true }, 'embedded-usage-store': { ok: true }, 'budget-book': { ok: true } })
    } finally {
      await gw.close()
    }
  })
})
