/**
 * The prompt the `gateway-prompt` scenario (run.ts) and the render microbenchmark (render.ts) use:
 * a chat template of about 2 KB of JSON with 5 variables (3 in the system message, 2 in the user
 * message), and the variables each request sends.
 */

/** The bench's chat template: about 2 KB of JSON with 5 variables. */
export function benchPromptTemplate(): string {
  const policy =
    'Answer only questions about travel bookings, cancellations, luggage and loyalty points. ' +
    'When a question is about anything else, say politely that you can only help with travel. ' +
    'Never invent flight numbers, prices or times: when you do not know, say so and offer to look it up. ' +
    'Keep answers short: three sentences at most unless the customer asks for detail. '
  const system =
    'You are {{assistant_name}}, the support assistant of {{company}}. ' +
    policy.repeat(5) +
    'The customer is a {{tier}} member; thank them for their loyalty once, at the start.'
  const user = 'Customer {{customer_name}} asks: {{question}}'
  return JSON.stringify([
    { role: 'system', content: system },
    { role: 'user', content: user },
  ])
}

/** The variables the bench sends (5, short, as a real request would). */
export const BENCH_PROMPT_VARIABLES: Readonly<Record<string, string>> = {
  assistant_name: 'Ava',
  company: 'Example Air',
  tier: 'gold',
  customer_name: 'Jordan Smith',
  question: 'Can I change my flight to Lisbon on the 14th to the evening one, and what does it cost?',
}
