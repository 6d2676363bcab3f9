import { describe, expect, it } from 'vitest'
import {
  CustomHostPolicy,
  classifyIp,
  embeddedIpv4,
  formatIp,
  isAddressAllowed,
  isConnectableAddress,
  isHostnameAllowed,
  parseAllowList,
  parseCustomHostUrl,
  parseIp,
  parseIpv4,
  parseIpv6,
  type HostResolver,
  type IpAddress,
} from '../../../../adapters/providers/custom-host-policy.js'

function ip(text: string): IpAddress {
  const parsed = parseIp(text)
  if (parsed === null) throw new Error(`test setup: ${text} is not an IP`)
  return parsed
}

describe('parseIpv4', () => {
  it.each([
    ['127.0.0.1', '127.0.0.1'],
    ['0x7f.1', '127.0.0.1'],
    ['2130706433', '127.0.0.1'],
    ['0177.0.0.1', '127.0.0.1'],
    ['127.1', '127.0.0.1'],
    ['0x7f000001', '127.0.0.1'],
    ['0X7F.0.0.1', '127.0.0.1'],
    ['169.254.43518', '169.254.169.254'],
    ['0xa9.0xfe.0xa9.0xfe', '169.254.169.254'],
    ['0', '0.0.0.0'],
    ['10.0.0.1.', '10.0.0.1'],
    ['0x', '0.0.0.0'],
  ])('reads %s as %s', (text, expected) => {
    const parsed = parseIpv4(text)
    expect(parsed).not.toBeNull()
    expect(formatIp(parsed as IpAddress)).toBe(expected)
  })

  it.each(['', 'abc', '1.2.3.4.5', '256.0.0.1', '1.2.3.256', '1.2.65536', '4294967296', '08', '1..2', '0x1g', '1.2.3.4..', 'localhost'])(
    'refuses %j',
    (text) => {
      expect(parseIpv4(text)).toBeNull()
    },
  )

  it.each(['0x7f.1', '2130706433', '0177.0.0.1', '127.1', '0x7f000001', '169.254.43518', '1.1', '0300.0250.0.1', '0xC0A80001'])(
    'agrees with the WHATWG URL parser on %s',
    (text) => {
      const whatwg = new URL(`http://${text}/`).hostname
      expect(formatIp(parseIpv4(text) as IpAddress)).toBe(whatwg)
    },
  )
})

describe('parseIpv6', () => {
  it.each([
    ['::1', 1n],
    ['::', 0n],
    ['[::1]', 1n],
    ['::ffff:169.254.169.254', 0xffffa9fea9fen],
    ['::ffff:a9fe:a9fe', 0xffffa9fea9fen],
    ['fd00:ec2::254', 0xfd000ec2000000000000000000000254n],
    ['1:2:3:4:5:6:7:8', 0x00010002000300040005000600070008n],
    ['1::', 0x00010000000000000000000000000000n],
    ['FE80::1', 0xfe800000000000000000000000000001n],
  ])('reads %s', (text, value) => {
    expect(parseIpv6(text)).toEqual({ family: 6, value })
  })

  it.each([':::', '1::2::3', 'fe80::1%eth0', '12345::', '1:2:3:4:5:6:7:8:9', '1:2:3:4:5:6:7', '::ffff:1.2.3', '::ffff:01.2.3.4', '1:2:3:4:5:6:7::8', 'g::1', '[::1', ':1::'])(
    'refuses %j',
    (text) => {
      expect(parseIpv6(text)).toBeNull()
    },
  )
})

describe('classifyIp', () => {
  it.each([
    ['8.8.8.8', 'public'],
    ['93.184.216.34', 'public'],
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['0x7f.1', 'loopback'],
    ['2130706433', 'loopback'],
    ['10.1.2.3', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['172.32.0.1', 'public'],
    ['192.168.1.1', 'private'],
    ['100.64.0.1', 'private'],
    ['169.254.1.1', 'link-local'],
    ['169.254.169.254', 'metadata'],
    ['169.254.43518', 'metadata'],
    ['100.100.100.200', 'metadata'],
    ['168.63.129.16', 'metadata'],
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', 'unspecified'],
    ['224.0.0.1', 'multicast'],
    ['239.255.255.250', 'multicast'],
    ['255.255.255.255', 'reserved'],
    ['240.0.0.1', 'reserved'],
    ['192.0.2.1', 'reserved'],
    ['198.18.0.1', 'reserved'],
    ['203.0.113.9', 'reserved'],
    ['::1', 'loopback'],
    ['::', 'unspecified'],
    ['fe80::1', 'link-local'],
    ['febf::1', 'link-local'],
    ['fc00::1', 'private'],
    ['fd12:3456::1', 'private'],
    ['fd00:ec2::254', 'metadata'],
    ['fd00:ec2::253', 'private'],
    ['ff02::1', 'multicast'],
    ['2001:db8::1', 'reserved'],
    ['2001::1', 'reserved'],
    ['100::1', 'reserved'],
    ['4000::1', 'reserved'],
    ['2606:4700:4700::1111', 'public'],
    ['2a00:1450:4001::200e', 'public'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['::ffff:169.254.169.254', 'metadata'],
    ['::ffff:10.0.0.1', 'private'],
    ['::ffff:8.8.8.8', 'public'],
    ['64:ff9b::a9fe:a9fe', 'metadata'],
    ['64:ff9b::808:808', 'public'],
    ['64:ff9b:1::1', 'private'],
    ['2002:a9fe:a9fe::1', 'metadata'],
    ['2002:7f00:1::1', 'loopback'],
    ['2002:808:808::1', 'public'],
    ['::7f00:1', 'loopback'],
    ['::808:808', 'reserved'],
  ] as const)('%s is %s', (text, cls) => {
    expect(classifyIp(text)).toBe(cls)
  })

  it('returns null for text that is not an address', () => {
    expect(classifyIp('example.com')).toBeNull()
    expect(classifyIp('')).toBeNull()
  })

  it('finds the IPv4 address inside mapped, NAT64 and 6to4 addresses', () => {
    expect(formatIp(embeddedIpv4(ip('::ffff:1.2.3.4')) as IpAddress)).toBe('1.2.3.4')
    expect(formatIp(embeddedIpv4(ip('64:ff9b::1.2.3.4')) as IpAddress)).toBe('1.2.3.4')
    expect(formatIp(embeddedIpv4(ip('2002:102:304::')) as IpAddress)).toBe('1.2.3.4')
    expect(embeddedIpv4(ip('2606:4700::1'))).toBeNull()
    expect(embeddedIpv4(ip('1.2.3.4'))).toBeNull()
  })

  it('refuses only link-local and metadata addresses at connect time', () => {
    expect(isConnectableAddress('169.254.169.254')).toBe(false)
    expect(isConnectableAddress('fe80::1')).toBe(false)
    expect(isConnectableAddress('::ffff:169.254.169.254')).toBe(false)
    expect(isConnectableAddress('not an address')).toBe(false)
    expect(isConnectableAddress('127.0.0.1')).toBe(true)
    expect(isConnectableAddress('10.0.0.1')).toBe(true)
    expect(isConnectableAddress('8.8.8.8')).toBe(true)
  })
})

describe('parseAllowList', () => {
  it('reads host names, wildcard suffixes, addresses and CIDR ranges from a comma list', () => {
    const allow = parseAllowList(' localhost, Mock.Internal. ,*.svc.cluster.local,127.0.0.1,10.0.0.0/8,::1,[fd00::1],fd12::/16,,')
    expect([...allow.hostnames].sort()).toEqual(['localhost', 'mock.internal'])
    expect(allow.suffixes).toEqual(['.svc.cluster.local'])
    expect(allow.ranges).toHaveLength(5)
  })

  it('flattens lists whose items are comma lists, and treats undefined as empty', () => {
    const allow = parseAllowList(['a.example', 'b.example,c.example'])
    expect([...allow.hostnames].sort()).toEqual(['a.example', 'b.example', 'c.example'])
    const empty = parseAllowList(undefined)
    expect(empty.hostnames.size + empty.suffixes.length + empty.ranges.length).toBe(0)
  })

  it.each(['localhost:9021', 'http://localhost', '10.0.0.0/33', '::1/129', '10.0.0.0/x', '0x7f.1', '127.1', '*.', 'exa mple.com', 'a/b', 'bad_[x]'])(
    'throws on the unreadable entry %j, naming it',
    (entry) => {
      expect(() => parseAllowList(`localhost,${entry}`)).toThrow(entry)
    },
  )

  it('matches addresses against single addresses and ranges', () => {
    const allow = parseAllowList('127.0.0.1,10.0.0.0/8,fd00::/8')
    expect(isAddressAllowed(allow, ip('127.0.0.1'))).toBe(true)
    expect(isAddressAllowed(allow, ip('127.0.0.2'))).toBe(false)
    expect(isAddressAllowed(allow, ip('10.200.3.4'))).toBe(true)
    expect(isAddressAllowed(allow, ip('11.0.0.1'))).toBe(false)
    expect(isAddressAllowed(allow, ip('fd12::1'))).toBe(true)
    expect(isAddressAllowed(allow, ip('fc00::1'))).toBe(false)
    expect(isAddressAllowed(allow, ip('::ffff:127.0.0.1'))).toBe(true)
    expect(isAddressAllowed(allow, ip('::1'))).toBe(false)
  })

  it('stores IPv4-mapped IPv6 entries as IPv4', () => {
    const allow = parseAllowList('::ffff:127.0.0.1,::ffff:10.0.0.0/104')
    expect(isAddressAllowed(allow, ip('127.0.0.1'))).toBe(true)
    expect(isAddressAllowed(allow, ip('10.9.9.9'))).toBe(true)
    expect(isAddressAllowed(allow, ip('11.0.0.1'))).toBe(false)
  })

  it('matches host names exactly or by wildcard suffix, case- and trailing-dot-insensitively', () => {
    const allow = parseAllowList('localhost,*.svc.cluster.local')
    expect(isHostnameAllowed(allow, 'LOCALHOST.')).toBe(true)
    expect(isHostnameAllowed(allow, 'mock.default.svc.cluster.local')).toBe(true)
    expect(isHostnameAllowed(allow, 'svc.cluster.local')).toBe(false)
    expect(isHostnameAllowed(allow, 'evilsvc.cluster.local')).toBe(false)
    expect(isHostnameAllowed(allow, 'localhost.evil.com')).toBe(false)
  })
})

describe('parseCustomHostUrl', () => {
  it.each([
    ['http://127.0.0.1:9021/v1', 'http://127.0.0.1:9021', '/v1'],
    ['http://127.0.0.1:9021/v1/', 'http://127.0.0.1:9021', '/v1'],
    ['https://example.com', 'https://example.com', ''],
    ['https://example.com:443/', 'https://example.com', ''],
    ['http://[::1]:8080/openai/v1//', 'http://[::1]:8080', '/openai/v1'],
    ['http://0x7f.1/v1', 'http://127.0.0.1', '/v1'],
    ['HTTP://Example.COM/A/B', 'http://example.com', '/A/B'],
  ])('accepts %s → origin %s, base path %j', (url, origin, basePath) => {
    const parsed = parseCustomHostUrl(url)
    expect(parsed.ok).toBe(true)
    if (parsed.ok) {
      expect(parsed.origin).toBe(origin)
      expect(parsed.basePath).toBe(basePath)
    }
  })

  it.each([
    ['file:///etc/passwd', 'http or https'],
    ['ftp://example.com/', 'http or https'],
    ['gopher://127.0.0.1:6379/_', 'http or https'],
    ['http://user:pass@example.com/', 'credentials'],
    ['http://user@example.com/', 'credentials'],
    ['http://@example.com/', 'credentials'],
    ['http://example.com/v1?x=1', 'query or fragment'],
    ['http://example.com/v1?', 'query or fragment'],
    ['http://example.com/v1#frag', 'query or fragment'],
    ['not a url', 'spaces or control'],
    ['example.com/v1', 'not a valid absolute URL'],
    ['http://exa\nmple.com/', 'spaces or control'],
    ['http://metadata.google.internal/computeMetadata/v1', 'metadata'],
    ['http://METADATA.GOOGLE.INTERNAL./', 'metadata'],
    ['http://metadata/', 'metadata'],
    ['http://metadata.azure.com/', 'metadata'],
    ['http://instance-data/latest', 'metadata'],
    ['', 'at most 2048'],
    [`http://example.com/${'a'.repeat(2100)}`, 'at most 2048'],
  ])('refuses %j (%s)', (url, reason) => {
    const parsed = parseCustomHostUrl(url)
    expect(parsed.ok).toBe(false)
    if (!parsed.ok) expect(parsed.reason).toContain(reason)
  })
})

/** A resolver over a fixed table that counts its calls. */
function fakeResolver(table: Record<string, readonly string[] | Error>): HostResolver & { calls: string[] } {
  const calls: string[] = []
  const resolve = async (hostname: string) => {
    calls.push(hostname)
    const entry = table[hostname]
    if (entry === undefined) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' })
    if (entry instanceof Error) throw entry
    return entry.map((address) => ({ address }))
  }
  return Object.assign(resolve, { calls })
}

describe('CustomHostPolicy', () => {
  const resolve = fakeResolver({})

  it.each([
    ['http://0x7f.1/'],
    ['http://2130706433/'],
    ['http://127.0.0.1:9021/v1'],
    ['http://[::1]:9021/v1'],
    ['http://10.0.0.8/v1'],
    ['http://0.0.0.0:8080/'],
    ['http://0/'],
    ['http://[::ffff:127.0.0.1]/'],
  ])('refuses the non-public address %s without an allow-list', async (url) => {
    const verdict = await new CustomHostPolicy({ allowList: [], resolve }).check(url)
    expect(verdict.ok).toBe(false)
    if (!verdict.ok) expect(verdict.reason).toMatch(/not allow-listed/)
  })

  it('allows a loopback address that is allow-listed, in any form the URL parser accepts', async () => {
    const policy = new CustomHostPolicy({ allowList: '127.0.0.1', resolve })
    await expect(policy.check('http://127.0.0.1:9021/v1/')).resolves.toEqual({ ok: true, origin: 'http://127.0.0.1:9021', basePath: '/v1' })
    await expect(policy.check('http://0x7f.1:9021/v1')).resolves.toEqual({ ok: true, origin: 'http://127.0.0.1:9021', basePath: '/v1' })
    await expect(policy.check('http://[::ffff:7f00:1]:9021/v1')).resolves.toMatchObject({ ok: true })
    expect((await policy.check('http://127.0.0.2/')).ok).toBe(false)
  })

  it('allows addresses inside an allow-listed range', async () => {
    const policy = new CustomHostPolicy({ allowList: '10.0.0.0/8,fd00::/8', resolve })
    expect((await policy.check('http://10.20.30.40/v1')).ok).toBe(true)
    expect((await policy.check('http://[fd12::5]/v1')).ok).toBe(true)
    expect((await policy.check('http://192.168.0.1/v1')).ok).toBe(false)
  })

  it.each([
    ['http://169.254.169.254/latest/meta-data'],
    ['http://[::ffff:169.254.169.254]/'],
    ['http://[fd00:ec2::254]/latest/meta-data'],
    ['http://169.254.43518/'],
    ['http://0xa9fea9fe/'],
    ['http://[fe80::1]/'],
    ['http://169.254.10.10/'],
    ['http://100.100.100.200/latest/meta-data'],
    ['http://[64:ff9b::a9fe:a9fe]/'],
  ])('always refuses the link-local or metadata address %s, even allow-listed', async (url) => {
    const policy = new CustomHostPolicy({ allowList: '0.0.0.0/0,::/0,169.254.169.254,fe80::/10', resolve })
    const verdict = await policy.check(url)
    expect(verdict.ok).toBe(false)
    if (!verdict.ok) expect(verdict.reason).toMatch(/link-local or cloud metadata/)
  })

  it('always refuses metadata host names, even allow-listed, without resolving them', async () => {
    const resolver = fakeResolver({ 'metadata.google.internal': ['8.8.8.8'] })
    const policy = new CustomHostPolicy({ allowList: 'metadata.google.internal,metadata', resolve: resolver })
    expect((await policy.check('http://metadata.google.internal/')).ok).toBe(false)
    expect((await policy.check('http://metadata/')).ok).toBe(false)
    expect(resolver.calls).toEqual([])
  })

  it('refuses credentials and non-http schemes', async () => {
    const policy = new CustomHostPolicy({ allowList: 'host,127.0.0.1', resolve: fakeResolver({ host: ['127.0.0.1'] }) })
    expect(await policy.check('http://user:pass@host/')).toEqual({ ok: false, reason: 'custom host must not contain credentials' })
    expect(await policy.check('file:///etc/passwd')).toEqual({ ok: false, reason: 'custom host must use http or https' })
  })

  it('allows public addresses without resolving anything', async () => {
    const resolver = fakeResolver({})
    const policy = new CustomHostPolicy({ allowList: [], resolve: resolver })
    expect(await policy.check('https://8.8.8.8/v1')).toEqual({ ok: true, origin: 'https://8.8.8.8', basePath: '/v1' })
    expect((await policy.check('https://[2606:4700:4700::1111]/v1')).ok).toBe(true)
    expect(resolver.calls).toEqual([])
  })

  it('allows a host name when every address it resolves to is public', async () => {
    const policy = new CustomHostPolicy({ allowList: [], resolve: fakeResolver({ 'api.example.com': ['93.184.216.34', '2606:2800:220:1::248'] }) })
    expect(await policy.check('https://api.example.com/v1')).toEqual({ ok: true, origin: 'https://api.example.com', basePath: '/v1' })
  })

  it('refuses a host name when any resolved address is private, without saying which', async () => {
    const policy = new CustomHostPolicy({ allowList: [], resolve: fakeResolver({ 'mixed.example.com': ['93.184.216.34', '10.0.0.5'] }) })
    const verdict = await policy.check('https://mixed.example.com/v1')
    expect(verdict).toEqual({ ok: false, reason: 'custom host resolves to an address that is not allow-listed' })
  })

  it('allows private addresses behind an allow-listed host name or an allow-listed address', async () => {
    const resolver = fakeResolver({ 'mock.internal': ['10.0.0.5'], 'other.internal': ['10.0.0.6'], 'mock.ns.svc.cluster.local': ['10.96.0.12'] })
    const policy = new CustomHostPolicy({ allowList: 'mock.internal,10.0.0.6,*.svc.cluster.local', resolve: resolver })
    expect((await policy.check('http://mock.internal:8080/v1')).ok).toBe(true)
    expect((await policy.check('http://other.internal:8080/v1')).ok).toBe(true)
    expect((await policy.check('http://mock.ns.svc.cluster.local:8080/v1')).ok).toBe(true)
  })

  it('refuses an allow-listed host name that resolves to a metadata address (DNS pointing at IMDS)', async () => {
    const resolver = fakeResolver({ 'evil.example.com': ['93.184.216.34', '169.254.169.254'] })
    const policy = new CustomHostPolicy({ allowList: 'evil.example.com', resolve: resolver })
    const verdict = await policy.check('https://evil.example.com/')
    expect(verdict).toEqual({ ok: false, reason: 'custom host is a link-local or cloud metadata address' })
  })

  it('refuses host names that do not resolve or resolve to nothing', async () => {
    const resolver = fakeResolver({ 'empty.example.com': [] })
    const policy = new CustomHostPolicy({ allowList: 'empty.example.com,missing.example.com', resolve: resolver })
    expect(await policy.check('https://missing.example.com/')).toEqual({ ok: false, reason: 'custom host could not be resolved' })
    expect(await policy.check('https://empty.example.com/')).toEqual({ ok: false, reason: 'custom host could not be resolved' })
  })

  it('never leaks the resolver error text', async () => {
    const resolver = fakeResolver({ 'secret.example.com': new Error('resolver 10.1.1.1 said: token=abc') })
    const verdict = await new CustomHostPolicy({ allowList: [], resolve: resolver }).check('https://secret.example.com/')
    expect(verdict.ok).toBe(false)
    if (!verdict.ok) expect(verdict.reason).not.toContain('token')
  })

  describe('cache', () => {
    it('reuses a verdict within the TTL and resolves again after it', async () => {
      let now = 1_000_000
      const resolver = fakeResolver({ 'api.example.com': ['93.184.216.34'] })
      const policy = new CustomHostPolicy({ allowList: [], resolve: resolver, now: () => now, cacheTtlMs: 30_000 })
      await policy.check('https://api.example.com/v1')
      now += 29_000
      await policy.check('https://api.example.com/v1')
      expect(resolver.calls).toHaveLength(1)
      now += 2_000
      await policy.check('https://api.example.com/v1')
      expect(resolver.calls).toHaveLength(2)
    })

    it('answers a known verdict as a plain value, a pending one as a promise', async () => {
      const resolver = fakeResolver({ 'api.example.com': ['93.184.216.34'] })
      const policy = new CustomHostPolicy({ allowList: [], resolve: resolver })
      const first = policy.check('https://api.example.com/v1')
      expect(first).toBeInstanceOf(Promise)
      expect(policy.check('https://api.example.com/v1')).toBeInstanceOf(Promise)
      const verdict = await first
      expect(policy.check('https://api.example.com/v1')).toEqual(verdict)
      expect(policy.check('https://api.example.com/v1')).not.toBeInstanceOf(Promise)
      expect(resolver.calls).toHaveLength(1)
    })

    it('shares one lookup between concurrent checks of the same URL', async () => {
      const resolver = fakeResolver({ 'api.example.com': ['93.184.216.34'] })
      const policy = new CustomHostPolicy({ allowList: [], resolve: resolver })
      const verdicts = await Promise.all([1, 2, 3, 4].map(() => policy.check('https://api.example.com/v1')))
      expect(verdicts.every((v) => v.ok)).toBe(true)
      expect(resolver.calls).toHaveLength(1)
    })

    it('forgets a failed lookup sooner than a verdict', async () => {
      let now = 0
      const resolver = fakeResolver({})
      const policy = new CustomHostPolicy({ allowList: [], resolve: resolver, now: () => now, cacheTtlMs: 30_000, failureTtlMs: 5_000 })
      await policy.check('https://flaky.example.com/')
      now += 4_000
      await policy.check('https://flaky.example.com/')
      expect(resolver.calls).toHaveLength(1)
      now += 2_000
      await policy.check('https://flaky.example.com/')
      expect(resolver.calls).toHaveLength(2)
    })

    it('keeps at most cacheSize verdicts', async () => {
      const resolver = fakeResolver({ 'a.example.com': ['1.1.1.1'], 'b.example.com': ['1.1.1.2'], 'c.example.com': ['1.1.1.3'] })
      const policy = new CustomHostPolicy({ allowList: [], resolve: resolver, cacheSize: 2 })
      await policy.check('https://a.example.com/')
      await policy.check('https://b.example.com/')
      await policy.check('https://c.example.com/')
      expect(policy.cachedCount).toBe(2)
      await policy.check('https://a.example.com/')
      expect(resolver.calls.filter((h) => h === 'a.example.com')).toHaveLength(2)
    })
  })
})

describe('host name normalisation', () => {
  it.each([
    ['http://LOCALHOST.:9021/v1/', 'http://localhost:9021', 'localhost'],
    ['http://localhost..:9021/v1', 'http://localhost:9021', 'localhost'],
    ['http://LocalHost.:9021/v1', 'http://localhost:9021', 'localhost'],
    ['http://local%68ost./v1', 'http://localhost', 'localhost'],
    ['http://ｌｏｃａｌｈｏｓｔ./v1', 'http://localhost', 'localhost'],
    ['https://Mock.Internal.:443/v1', 'https://mock.internal', 'mock.internal'],
    ['https://BÜcher.de./v1', 'https://xn--bcher-kva.de', 'xn--bcher-kva.de'],
  ])('names %s by its normalised host: origin %s, checked as %s', (url, origin, hostname) => {
    const parsed = parseCustomHostUrl(url)
    expect(parsed).toEqual({ ok: true, origin, basePath: '/v1', hostname, ip: null })
  })

  it.each([
    ['http://127.1:9021/v1'],
    ['http://0x7f.1:9021/v1'],
    ['http://0x7f.0.0.1.:9021/v1'],
    ['http://2130706433:9021/v1'],
    ['http://0177.0.0.1:9021/v1'],
    ['http://127.0.0.1.:9021/v1'],
    ['http://127.0.0.1%2e:9021/v1'],
  ])('writes the IPv4 spelling %s as 127.0.0.1 (the URL parser canonicalises it)', (url) => {
    expect(parseCustomHostUrl(url)).toMatchObject({ ok: true, origin: 'http://127.0.0.1:9021', hostname: '127.0.0.1' })
  })

  it('judges [::ffff:127.0.0.1] as the IPv4 address it carries, and 0 as the unspecified address', () => {
    expect(parseCustomHostUrl('http://[::ffff:127.0.0.1]/')).toMatchObject({ ok: true, origin: 'http://[::ffff:7f00:1]' })
    expect(classifyIp((parseCustomHostUrl('http://[::ffff:127.0.0.1]/') as { ip: IpAddress }).ip)).toBe('loopback')
    expect(parseCustomHostUrl('http://0/')).toMatchObject({ ok: true, origin: 'http://0.0.0.0', hostname: '0.0.0.0' })
  })

  it.each(['http://./', 'http://../v1', 'http://.../'])('refuses %s, which names no host once its dots are dropped', (url) => {
    expect(parseCustomHostUrl(url)).toEqual({ ok: false, reason: 'custom host is not a valid absolute URL' })
  })

  it('resolves and connects to the name it checked: LOCALHOST. is looked up and answered as localhost', async () => {
    const resolver = fakeResolver({ localhost: ['127.0.0.1'] })
    const policy = new CustomHostPolicy({ allowList: 'localhost', resolve: resolver })
    await expect(policy.check('http://LOCALHOST.:9021/v1/')).resolves.toEqual({ ok: true, origin: 'http://localhost:9021', basePath: '/v1' })
    await expect(policy.check('http://localhost..:9021/v1')).resolves.toEqual({ ok: true, origin: 'http://localhost:9021', basePath: '/v1' })
    expect(resolver.calls).toEqual(['localhost', 'localhost'])
  })

  it('refuses the trailing-dot spelling of a name that is not allow-listed exactly as the plain name', async () => {
    const resolver = fakeResolver({ localhost: ['127.0.0.1'] })
    const policy = new CustomHostPolicy({ allowList: [], resolve: resolver })
    const plain = await policy.check('http://localhost:9021/v1')
    expect(plain.ok).toBe(false)
    expect(await policy.check('http://LOCALHOST.:9021/v1')).toEqual(plain)
    expect(await policy.check('http://metadata.google.internal../')).toEqual({ ok: false, reason: 'custom host is a cloud metadata endpoint' })
  })

  it('refuses every spelling of a loopback address that is not allow-listed', async () => {
    const policy = new CustomHostPolicy({ allowList: '10.0.0.0/8', resolve: fakeResolver({}) })
    for (const url of ['http://127.1/', 'http://0x7f.1/', 'http://2130706433/', 'http://127.0.0.1./', 'http://[::ffff:127.0.0.1]/', 'http://[::1]/', 'http://0/']) {
      const verdict = await policy.check(url)
      expect(verdict.ok, url).toBe(false)
    }
  })
})
