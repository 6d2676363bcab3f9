import { STATUS_CODES } from 'node:http'

/** uWS wants the whole status line text (`200 OK`); built once. */
const STATUS_LINES: string[] = []
for (const [code, text] of Object.entries(STATUS_CODES)) STATUS_LINES[Number(code)] = `${code} ${text ?? ''}`

/** The status line for a code; an unknown code (e.g. a provider's 529) becomes `<code> Unknown`. */
export function statusLine(status: number): string {
  return STATUS_LINES[status] ?? `${status} Unknown`
}
