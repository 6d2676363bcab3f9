/**
 * Budget amounts: limits in counter units (integers: tokens, or nano-USD = USD × 10⁹) and back, and
 * for messages. The price arithmetic (`costNanoUsd`, `worstCaseNanoUsd`) is in core/budgets.ts,
 * shared with the log plugin.
 */
import { NANO_USD_PER_USD } from '../../core/budgets.js'

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
