/**
 * Budget arithmetic in nano-USD (integers, USD × 10⁹), from prices in USD per million tokens:
 * one token at P USD/1M costs P × 1000 nano-USD.
 * - Real cost: `costNanoUsd` (core/budgets.ts, shared with the log plugin).
 * - Worst case (the reservation): every prompt token at the input price and every possible output
 *   token at the higher of the output and reasoning prices.
 */
import { NANO_USD_PER_USD, type ModelPrice } from '../../core/budgets.js'

export { costNanoUsd, type TokenCounts } from '../../core/budgets.js'

const NANO_PER_TOKEN_PER_PRICE = 1_000

function count(value: number | undefined): number {
  return value !== undefined && Number.isFinite(value) && value > 0 ? value : 0
}

/** The most a request can cost, in nano-USD (rounded up). */
export function worstCaseNanoUsd(price: ModelPrice, promptTokens: number, maxOutputTokens: number): number {
  const output = Math.max(price.output, price.reasoning ?? price.output)
  return Math.ceil((count(promptTokens) * price.input + count(maxOutputTokens) * output) * NANO_PER_TOKEN_PER_PRICE)
}

/** A usage limit amount in its counter's integer unit: tokens as given, USD → nano-USD. */
export function toCounterUnit(type: 'cost' | 'tokens', amount: number): number {
  return type === 'cost' ? Math.round(amount * NANO_USD_PER_USD) : amount
}

/** A counter amount back in the limit's unit (USD or tokens). */
export function fromCounterUnit(type: 'cost' | 'tokens', amount: number): number {
  return type === 'cost' ? amount / NANO_USD_PER_USD : amount
}

/** A counter amount for messages: `12.50 USD`, `0.000125 USD`, `1500 tokens` (without the unit when `unit` is false). */
export function formatAmount(type: 'cost' | 'tokens', amount: number, unit = true): string {
  if (type === 'tokens') return unit ? `${amount} tokens` : String(amount)
  const usd = amount / NANO_USD_PER_USD
  const text = usd >= 1 || usd === 0 ? usd.toFixed(2) : usd.toPrecision(3).replace(/\.?0+$/, '')
  return unit ? `${text} USD` : text
}
