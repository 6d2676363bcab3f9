/**
 * The SSRF guard for custom hosts (`x-gateway-custom-host`, a virtual key's or config's
 * `custom_host`).
 *
 * Rules:
 * - absolute `http:` or `https:` URL, no credentials, no query or fragment;
 * - link-local and cloud-metadata addresses and metadata host names are always refused, even when
 *   allow-listed;
 * - public addresses are allowed;
 * - every other address (loopback, private, unspecified, multicast, reserved) is allowed only when
 *   the host name or the address matches the operator allow-list (`GATEWAY_ALLOWED_CUSTOM_HOSTS`);
 * - a host name is resolved and every address it resolves to must pass.
 *
 * Address forms are taken as WHATWG URL normalises them (`0x7f.1`, `2130706433` and `0177.0.0.1`
 * are all 127.0.0.1); the IPv4 parser here accepts the same forms so the helpers agree with the
 * URL parser when they are called directly. Host names are lower-cased (IDNs in punycode, as the URL
 * parser gives them) and lose their trailing dots before any list is matched, and the verdict's
 * origin carries that normalised name: `http://LOCALHOST.:8080/v1/` is checked, connected to and
 * stored as `http://localhost:8080/v1`. IPv6 addresses that carry an IPv4 address
 * (`::ffff:a.b.c.d`, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`) are judged by the address they carry.
 *
 * Checks run on the hot path of every custom-host request, so results are cached per URL string
 * for a short time (bounded size), and concurrent checks of one URL share one DNS lookup.
 */
import { lookup as dnsLookup } from 'node:dns/promises'
import type { CustomHostCheck } from '../../core/ports.js'

// ---------------------------------------------------------------------------------------------
// IP addresses

/** An IP address as a number: 32 bits for IPv4, 128 bits for IPv6. */
export interface IpAddress {
  readonly family: 4 | 6
  readonly value: bigint
}

/** What an address is, from the point of view of "may the gateway connect to it". */
export const IP_CLASSES = [
  'public',
  'loopback',
  'private',
  'link-local',
  'metadata',
  'unspecified',
  'multicast',
  'reserved',
] as const
export type IpClass = (typeof IP_CLASSES)[number]

const MAX_IPV4 = 0xffffffffn

/**
 * Parses an IPv4 address the way the WHATWG URL host parser does: one to four parts, each decimal,
 * octal (leading `0`) or hex (`0x`), the last part filling the remaining bytes (`127.1`,
 * `2130706433`). A single trailing dot is accepted. Returns `null` when `text` is not IPv4.
 */
export function parseIpv4(text: string): IpAddress | null {
  if (text.length === 0 || text.length > 64) return null
  const parts = text.split('.')
  if (parts.length > 1 && parts[parts.length - 1] === '') parts.pop()
  if (parts.length === 0 || parts.length > 4) return null
  const numbers: bigint[] = []
  for (const part of parts) {
    const n = parseIpv4Number(part)
    if (n === null) return null
    numbers.push(n)
  }
  const last = numbers.length - 1
  let value = 0n
  for (let i = 0; i < last; i++) {
    const n = numbers[i] as bigint
    if (n > 255n) return null
    value |= n << BigInt(8 * (3 - i))
  }
  const tail = numbers[last] as bigint
  if (tail >= 1n << BigInt(8 * (4 - last))) return null
  value |= tail
  return { family: 4, value }
}

function parseIpv4Number(part: string): bigint | null {
  if (part.length === 0) return null
  let digits = part
  let pattern = /^[0-9]+$/
  let prefix = ''
  if (part.length >= 2 && (part.startsWith('0x') || part.startsWith('0X'))) {
    digits = part.slice(2)
    pattern = /^[0-9a-fA-F]*$/
    prefix = '0x'
  } else if (part.length >= 2 && part.startsWith('0')) {
    digits = part.slice(1)
    pattern = /^[0-7]+$/
    prefix = '0o'
  }
  if (!pattern.test(digits)) return null
  if (digits.length === 0) return 0n
  // Longer than any valid part: refuse instead of building huge numbers.
  if (digits.length > 32) return null
  return BigInt(prefix + digits)
}

/**
 * Parses an IPv6 address (optionally in brackets, with `::` compression and a trailing dotted IPv4
 * part). Zone ids (`%eth0`) are refused. Returns `null` when `text` is not IPv6.
 */
export function parseIpv6(text: string): IpAddress | null {
  let s = text
  if (s.startsWith('[') && s.endsWith(']')) s = s.slice(1, -1)
  if (s.length < 2 || s.length > 45 || !/^[0-9a-fA-F:.]+$/.test(s)) return null
  const halves = s.split('::')
  if (halves.length > 2) return null
  const head = halves[0] === '' ? [] : (halves[0] as string).split(':')
  const tail = halves.length === 2 ? (halves[1] === '' ? [] : (halves[1] as string).split(':')) : []
  const groups: number[] = []
  const parseGroups = (list: string[], allowIpv4Tail: boolean): boolean => {
    for (let i = 0; i < list.length; i++) {
      const g = list[i] as string
      if (allowIpv4Tail && i === list.length - 1 && g.includes('.')) {
        const v4 = parseDottedQuad(g)
        if (v4 === null) return false
        groups.push(Number(v4 >> 16n), Number(v4 & 0xffffn))
        continue
      }
      if (!/^[0-9a-fA-F]{1,4}$/.test(g)) return false
      groups.push(parseInt(g, 16))
    }
    return true
  }
  if (!parseGroups(head, halves.length === 1)) return null
  const headCount = groups.length
  if (!parseGroups(tail, true)) return null
  const tailCount = groups.length - headCount
  if (halves.length === 1) {
    if (groups.length !== 8) return null
  } else {
    if (groups.length > 7) return null
    groups.splice(headCount, 0, ...new Array<number>(8 - headCount - tailCount).fill(0))
  }
  let value = 0n
  for (const g of groups) value = (value << 16n) | BigInt(g)
  return { family: 6, value }
}

/** Strict `a.b.c.d` (decimal, no leading zeros), as allowed inside IPv6. */
function parseDottedQuad(text: string): bigint | null {
  const parts = text.split('.')
  if (parts.length !== 4) return null
  let value = 0n
  for (const p of parts) {
    if (!/^(0|[1-9][0-9]{0,2})$/.test(p)) return null
    const n = Number(p)
    if (n > 255) return null
    value = (value << 8n) | BigInt(n)
  }
  return value
}

/** Parses an IPv4 (any WHATWG form) or IPv6 address (bare or bracketed); `null` for anything else. */
export function parseIp(text: string): IpAddress | null {
  if (text.includes(':')) return parseIpv6(text)
  return parseIpv4(text)
}

/** Text of an address: dotted IPv4, or all eight IPv6 groups in lower-case hex (no `::` compression). */
export function formatIp(ip: IpAddress): string {
  if (ip.family === 4) {
    return [24n, 16n, 8n, 0n].map((shift) => String((ip.value >> shift) & 0xffn)).join('.')
  }
  const groups: string[] = []
  for (let shift = 112n; shift >= 0n; shift -= 16n) groups.push(((ip.value >> shift) & 0xffffn).toString(16))
  return groups.join(':')
}

interface Cidr {
  readonly family: 4 | 6
  readonly network: bigint
  readonly prefix: number
  readonly mask: bigint
}

function cidr(family: 4 | 6, network: bigint, prefix: number): Cidr {
  const bits = family === 4 ? 32 : 128
  const all = (1n << BigInt(bits)) - 1n
  const mask = prefix === 0 ? 0n : (all >> BigInt(bits - prefix)) << BigInt(bits - prefix)
  return { family, network: network & mask, prefix, mask }
}

function inCidr(ip: IpAddress, range: Cidr): boolean {
  return ip.family === range.family && (ip.value & range.mask) === range.network
}

function range(text: string): Cidr {
  const slash = text.indexOf('/')
  const ip = parseIp(text.slice(0, slash)) as IpAddress
  return cidr(ip.family, ip.value, Number(text.slice(slash + 1)))
}

// Order matters: the first match wins, so exact metadata addresses come before their ranges.
const IPV4_RANGES: ReadonlyArray<readonly [Cidr, IpClass]> = [
  [range('169.254.169.254/32'), 'metadata'], // AWS, GCP, Azure, OCI, DigitalOcean, ...
  [range('100.100.100.200/32'), 'metadata'], // Alibaba Cloud
  [range('168.63.129.16/32'), 'metadata'], // Azure WireServer
  [range('0.0.0.0/8'), 'unspecified'],
  [range('127.0.0.0/8'), 'loopback'],
  [range('169.254.0.0/16'), 'link-local'],
  [range('10.0.0.0/8'), 'private'],
  [range('172.16.0.0/12'), 'private'],
  [range('192.168.0.0/16'), 'private'],
  [range('100.64.0.0/10'), 'private'], // carrier-grade NAT
  [range('224.0.0.0/4'), 'multicast'],
  [range('192.0.0.0/24'), 'reserved'],
  [range('192.0.2.0/24'), 'reserved'],
  [range('192.88.99.0/24'), 'reserved'],
  [range('198.18.0.0/15'), 'reserved'],
  [range('198.51.100.0/24'), 'reserved'],
  [range('203.0.113.0/24'), 'reserved'],
  [range('240.0.0.0/4'), 'reserved'], // includes 255.255.255.255
]

const IPV6_RANGES: ReadonlyArray<readonly [Cidr, IpClass]> = [
  [range('fd00:ec2::254/128'), 'metadata'], // AWS IPv6 instance metadata
  [range('::/128'), 'unspecified'],
  [range('::1/128'), 'loopback'],
  [range('64:ff9b:1::/48'), 'private'], // local-use NAT64
  [range('fe80::/10'), 'link-local'],
  [range('fc00::/7'), 'private'],
  [range('fec0::/10'), 'private'], // deprecated site-local
  [range('ff00::/8'), 'multicast'],
  [range('100::/64'), 'reserved'],
  [range('2001::/23'), 'reserved'], // IETF protocol assignments, Teredo
  [range('2001:db8::/32'), 'reserved'],
  [range('3fff::/20'), 'reserved'],
]

const MAPPED = range('::ffff:0:0/96')
const NAT64 = range('64:ff9b::/96')
const SIX_TO_FOUR = range('2002::/16')
const COMPATIBLE = range('::/96')
const GLOBAL_UNICAST = range('2000::/3')

/**
 * The IPv4 address an IPv6 address carries and reaches: IPv4-mapped, NAT64, 6to4 and the
 * deprecated IPv4-compatible form. `null` for any other address.
 */
export function embeddedIpv4(ip: IpAddress): IpAddress | null {
  if (ip.family !== 6) return null
  if (inCidr(ip, MAPPED) || inCidr(ip, NAT64) || inCidr(ip, COMPATIBLE)) {
    return { family: 4, value: ip.value & MAX_IPV4 }
  }
  if (inCidr(ip, SIX_TO_FOUR)) return { family: 4, value: (ip.value >> 80n) & MAX_IPV4 }
  return null
}

/**
 * Classifies an address. Accepts text in any form `parseIp` takes, or a parsed address. Returns
 * `null` when the text is not an IP address.
 */
export function classifyIp(input: string | IpAddress): IpClass | null {
  const ip = typeof input === 'string' ? parseIp(input) : input
  if (ip === null) return null
  if (ip.family === 4) return classifyIpv4(ip)
  if (ip.value === 0n) return 'unspecified'
  if (ip.value === 1n) return 'loopback'
  const embedded = embeddedIpv4(ip)
  if (embedded !== null) {
    const inner = classifyIpv4(embedded)
    if (inner !== 'public') return inner
    // An IPv4-compatible address is deprecated and never a legitimate public target.
    return inCidr(ip, COMPATIBLE) ? 'reserved' : 'public'
  }
  for (const [r, cls] of IPV6_RANGES) if (inCidr(ip, r)) return cls
  return inCidr(ip, GLOBAL_UNICAST) ? 'public' : 'reserved'
}

function classifyIpv4(ip: IpAddress): IpClass {
  for (const [r, cls] of IPV4_RANGES) if (inCidr(ip, r)) return cls
  return 'public'
}

/** Link-local and cloud-metadata addresses: never a legitimate upstream, whatever the allow-list says. */
export function isForbiddenClass(cls: IpClass): boolean {
  return cls === 'link-local' || cls === 'metadata'
}

/**
 * For connect-time checks (after DNS, inside the upstream client): `false` for addresses that must
 * never be connected to (link-local, metadata) and for text that is not an address.
 */
export function isConnectableAddress(address: string): boolean {
  const cls = classifyIp(address)
  return cls !== null && !isForbiddenClass(cls)
}

// ---------------------------------------------------------------------------------------------
// Metadata host names

/** Host names of cloud metadata services, refused whatever they resolve to. */
export const METADATA_HOSTNAMES: ReadonlySet<string> = new Set([
  'metadata.google.internal',
  'metadata',
  'metadata.azure.com',
  'instance-data',
  'instance-data.ec2.internal',
])

/** Lower-cases a host name and drops trailing dots (`Metadata.Google.Internal.` → `metadata.google.internal`). */
export function normaliseHostname(hostname: string): string {
  let end = hostname.length
  while (end > 0 && hostname.charCodeAt(end - 1) === 0x2e) end--
  return hostname.slice(0, end).toLowerCase()
}

// ---------------------------------------------------------------------------------------------
// The operator allow-list

/** A parsed `GATEWAY_ALLOWED_CUSTOM_HOSTS`. */
export interface AllowList {
  /** Exact host names, normalised. */
  readonly hostnames: ReadonlySet<string>
  /** Suffixes from `*.example.com` entries, stored as `.example.com`. */
  readonly suffixes: readonly string[]
  /** Addresses (as /32 or /128) and CIDR ranges. */
  readonly ranges: readonly Cidr[]
}

const HOSTNAME_PATTERN = /^(?=.{1,253}$)([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*$/

/**
 * Parses the allow-list: host names (`localhost`, `mock.svc.cluster.local`), wildcard suffixes
 * (`*.svc.cluster.local`), IPv4/IPv6 addresses (`127.0.0.1`, `::1`, `[::1]`) and CIDR ranges
 * (`10.0.0.0/8`, `fd00::/8`). Accepts one comma-separated string or a list whose items may
 * themselves be comma-separated; blanks are ignored. Throws on an entry it cannot read, naming it,
 * so a typo fails at boot rather than silently refusing hosts.
 */
export function parseAllowList(input: string | readonly string[] | undefined): AllowList {
  const hostnames = new Set<string>()
  const suffixes: string[] = []
  const ranges: Cidr[] = []
  const items = input === undefined ? [] : typeof input === 'string' ? [input] : input
  for (const item of items) {
    for (const raw of item.split(',')) {
      const entry = raw.trim()
      if (entry === '') continue
      const parsedRange = parseRangeEntry(entry)
      if (parsedRange !== null) {
        ranges.push(parsedRange)
        continue
      }
      if (entry.startsWith('*.')) {
        const suffix = normaliseHostname(entry.slice(2))
        if (!HOSTNAME_PATTERN.test(suffix)) throw invalidEntry(entry)
        suffixes.push(`.${suffix}`)
        continue
      }
      const name = normaliseHostname(entry)
      if (!HOSTNAME_PATTERN.test(name) || parseIpv4(name) !== null || /^[0-9.]+$/.test(name)) throw invalidEntry(entry)
      hostnames.add(name)
    }
  }
  return { hostnames, suffixes, ranges }
}

function invalidEntry(entry: string): Error {
  return new Error(`GATEWAY_ALLOWED_CUSTOM_HOSTS: cannot read entry "${entry}" (expected a host name, *.suffix, IP address or CIDR)`)
}

function parseRangeEntry(entry: string): Cidr | null {
  const slash = entry.indexOf('/')
  const addressText = slash === -1 ? entry : entry.slice(0, slash)
  const ip = addressText.includes(':') ? parseIpv6(addressText) : parseStrictIpv4Entry(addressText)
  if (ip === null) {
    if (slash !== -1) throw invalidEntry(entry)
    return null
  }
  const bits = ip.family === 4 ? 32 : 128
  let prefix = bits
  if (slash !== -1) {
    const prefixText = entry.slice(slash + 1)
    if (!/^[0-9]{1,3}$/.test(prefixText) || Number(prefixText) > bits) throw invalidEntry(entry)
    prefix = Number(prefixText)
  }
  // `::ffff:127.0.0.1` and `::ffff:10.0.0.0/104` mean IPv4 addresses: store them as such.
  if (ip.family === 6 && prefix >= 96 && inCidr(ip, MAPPED)) return cidr(4, ip.value & MAX_IPV4, prefix - 96)
  return cidr(ip.family, ip.value, prefix)
}

/** Allow-list entries use plain dotted IPv4; a name like `0x7f.1` there is most likely a mistake. */
function parseStrictIpv4Entry(text: string): IpAddress | null {
  const value = parseDottedQuad(text)
  return value === null ? null : { family: 4, value }
}

/** Whether a (normalised) host name is allow-listed, exactly or by a wildcard suffix. */
export function isHostnameAllowed(allow: AllowList, hostname: string): boolean {
  const name = normaliseHostname(hostname)
  if (allow.hostnames.has(name)) return true
  for (const suffix of allow.suffixes) if (name.endsWith(suffix)) return true
  return false
}

/** Whether an address is allow-listed; an IPv4-mapped IPv6 address also matches its IPv4 form. */
export function isAddressAllowed(allow: AllowList, ip: IpAddress): boolean {
  for (const r of allow.ranges) if (inCidr(ip, r)) return true
  if (ip.family === 6 && inCidr(ip, MAPPED)) {
    const v4: IpAddress = { family: 4, value: ip.value & MAX_IPV4 }
    for (const r of allow.ranges) if (inCidr(v4, r)) return true
  }
  return false
}

// ---------------------------------------------------------------------------------------------
// Checking one URL

const MAX_URL_LENGTH = 2048

/** The syntactic half of a check: what the URL names, before any DNS. */
export type ParsedCustomHost =
  | {
      readonly ok: true
      readonly origin: string
      readonly basePath: string
      /** Normalised host name, or the canonical address text for IP literals. */
      readonly hostname: string
      /** Set when the host is an IP literal. */
      readonly ip: IpAddress | null
    }
  | { readonly ok: false; readonly reason: string }

/** Parses and validates the URL itself: scheme, credentials, query, fragment, metadata names. */
export function parseCustomHostUrl(url: string): ParsedCustomHost {
  if (url.length === 0 || url.length > MAX_URL_LENGTH) return refuse('custom host must be an http(s) URL of at most 2048 characters')
  // Control characters and spaces are silently stripped or dropped by URL parsers; refuse them outright.
  if (/[\u0000-\u0020\u007f]/.test(url)) return refuse('custom host must not contain spaces or control characters')
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    return refuse('custom host is not a valid absolute URL')
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') return refuse('custom host must use http or https')
  if (parsed.username !== '' || parsed.password !== '' || authorityOf(url).includes('@')) {
    return refuse('custom host must not contain credentials')
  }
  if (parsed.search !== '' || parsed.hash !== '' || url.includes('?') || url.includes('#')) {
    return refuse('custom host must not contain a query or fragment')
  }
  const host = parsed.hostname
  if (host === '') return refuse('custom host is not a valid absolute URL')
  const basePath = trimTrailingSlashes(parsed.pathname)
  const ip = host.startsWith('[') ? parseIpv6(host) : parseIpv4(host)
  // The URL parser already writes every IPv4 spelling (`0x7f.1`, `127.1`, `2130706433`, `127.0.0.1.`) as dotted decimal.
  if (ip !== null) return { ok: true, origin: parsed.origin, basePath, hostname: formatIp(ip), ip }
  const hostname = normaliseHostname(host)
  if (hostname === '') return refuse('custom host is not a valid absolute URL')
  if (METADATA_HOSTNAMES.has(hostname)) return refuse('custom host is a cloud metadata endpoint')
  // The origin names the host exactly as it was checked: with a trailing dot (`localhost.`) the
  // connection would resolve another name than the one the allow-list and DNS check judged.
  const origin = `${parsed.protocol}//${hostname}${parsed.port === '' ? '' : `:${parsed.port}`}`
  return { ok: true, origin, basePath, hostname, ip: null }
}

function authorityOf(url: string): string {
  const start = url.indexOf('//')
  if (start === -1) return ''
  const rest = url.slice(start + 2)
  const end = rest.search(/[/?#\\]/)
  return end === -1 ? rest : rest.slice(0, end)
}

function trimTrailingSlashes(path: string): string {
  let end = path.length
  while (end > 0 && path.charCodeAt(end - 1) === 0x2f) end--
  return path.slice(0, end)
}

function refuse(reason: string): { readonly ok: false; readonly reason: string } {
  return { ok: false, reason }
}

/** The verdict for one address of a host, given whether the host name itself is allow-listed. */
export function judgeAddress(allow: AllowList, ip: IpAddress, hostnameAllowed: boolean): { ok: true } | { ok: false; reason: string } {
  const cls = classifyIp(ip) as IpClass
  if (isForbiddenClass(cls)) return refuse('custom host is a link-local or cloud metadata address')
  if (cls === 'public' || hostnameAllowed || isAddressAllowed(allow, ip)) return { ok: true }
  return refuse(`custom host is ${cls === 'unspecified' ? 'an' : 'a'} ${cls} address that is not allow-listed`)
}

/**
 * The connect-time rule for upstream connections (see `UndiciUpstreamClient`'s `isAddressAllowed`):
 * an address passes when `judgeAddress` would accept it for that host name. Public addresses pass;
 * link-local and metadata never do; other non-public addresses only when the host name or the
 * address is allow-listed. It closes DNS rebinding: a name that passed the custom-host check as
 * public and later resolves to a private address is refused when the connection opens.
 */
export function connectAddressPolicy(allow: AllowList): (address: string, hostname: string) => boolean {
  return (address, hostname) => {
    const ip = parseIp(address)
    return ip !== null && judgeAddress(allow, ip, isHostnameAllowed(allow, hostname)).ok
  }
}

/** Resolves a host name to all of its addresses (as `dns.lookup` with `all: true` does). */
export type HostResolver = (hostname: string) => Promise<ReadonlyArray<{ readonly address: string }>>

const systemResolver: HostResolver = (hostname) => dnsLookup(hostname, { all: true, verbatim: true })

export interface CustomHostPolicyOptions {
  /** Raw allow-list entries (see `parseAllowList`). */
  readonly allowList: string | readonly string[] | undefined
  /** Defaults to the system resolver (`node:dns/promises` `lookup`). */
  readonly resolve?: HostResolver
  /** How long a verdict is reused. Default 30 s. */
  readonly cacheTtlMs?: number
  /** How long a failed DNS lookup is remembered. Default 5 s. */
  readonly failureTtlMs?: number
  /** Most URLs kept; the oldest entry makes room. Default 1000. */
  readonly cacheSize?: number
  /** Time source for the cache. Default `Date.now`. */
  readonly now?: () => number
}

interface CacheEntry {
  expiresAt: number
  readonly verdict: Promise<CustomHostCheck>
  /** The verdict once known: a cached check then answers without a promise. */
  settled: CustomHostCheck | null
}

const UNRESOLVABLE = 'custom host could not be resolved'

/**
 * Applies the rules to custom host URLs, with a per-URL verdict cache. Never rejects: every
 * problem is a `{ok: false, reason}` with a reason that is safe to show to the client.
 */
export class CustomHostPolicy {
  readonly allowList: AllowList
  private readonly resolve: HostResolver
  private readonly ttlMs: number
  private readonly failureTtlMs: number
  private readonly cacheSize: number
  private readonly now: () => number
  private readonly cache = new Map<string, CacheEntry>()

  constructor(options: CustomHostPolicyOptions) {
    this.allowList = parseAllowList(options.allowList)
    this.resolve = options.resolve ?? systemResolver
    this.ttlMs = options.cacheTtlMs ?? 30_000
    this.failureTtlMs = options.failureTtlMs ?? 5_000
    this.cacheSize = Math.max(1, options.cacheSize ?? 1000)
    this.now = options.now ?? Date.now
  }

  /**
   * The verdict for `url`, from the cache when a fresh one is there: as a plain value once it is
   * known (the request path then does not wait a microtask for it), else as a promise.
   */
  check(url: string): CustomHostCheck | Promise<CustomHostCheck> {
    const now = this.now()
    const hit = this.cache.get(url)
    if (hit !== undefined && hit.expiresAt > now) return hit.settled ?? hit.verdict
    if (hit !== undefined) this.cache.delete(url)
    const verdict = this.evaluate(url)
    if (url.length <= MAX_URL_LENGTH) {
      const entry: CacheEntry = { expiresAt: now + this.ttlMs, verdict, settled: null }
      this.remember(url, entry)
      verdict.then(
        (settled) => {
          entry.settled = settled
        },
        // The caller gets the rejection from `verdict`; a failed check is not remembered.
        () => {
          if (this.cache.get(url) === entry) this.cache.delete(url)
        },
      )
    }
    return verdict
  }

  /** Number of cached verdicts (for tests and metrics). */
  get cachedCount(): number {
    return this.cache.size
  }

  private remember(url: string, entry: CacheEntry): void {
    if (this.cache.size >= this.cacheSize) {
      const oldest = this.cache.keys().next()
      if (oldest.done !== true) this.cache.delete(oldest.value)
    }
    this.cache.set(url, entry)
  }

  private async evaluate(url: string): Promise<CustomHostCheck> {
    const parsed = parseCustomHostUrl(url)
    if (!parsed.ok) return parsed
    const ok: CustomHostCheck = { ok: true, origin: parsed.origin, basePath: parsed.basePath }
    if (parsed.ip !== null) {
      const verdict = judgeAddress(this.allowList, parsed.ip, false)
      return verdict.ok ? ok : verdict
    }
    const hostnameAllowed = isHostnameAllowed(this.allowList, parsed.hostname)
    let addresses: ReadonlyArray<{ readonly address: string }>
    try {
      addresses = await this.resolve(parsed.hostname)
    } catch {
      this.shortenLifetime(url)
      return refuse(UNRESOLVABLE)
    }
    if (addresses.length === 0) {
      this.shortenLifetime(url)
      return refuse(UNRESOLVABLE)
    }
    for (const { address } of addresses) {
      const ip = parseIp(address)
      if (ip === null) return refuse(UNRESOLVABLE)
      const verdict = judgeAddress(this.allowList, ip, hostnameAllowed)
      // The addresses behind a name are not the client's business: one reason for every refusal.
      if (!verdict.ok) {
        return isForbiddenClass(classifyIp(ip) as IpClass)
          ? verdict
          : refuse('custom host resolves to an address that is not allow-listed')
      }
    }
    return ok
  }

  private shortenLifetime(url: string): void {
    const entry = this.cache.get(url)
    if (entry !== undefined) entry.expiresAt = Math.min(entry.expiresAt, this.now() + this.failureTtlMs)
  }
}
