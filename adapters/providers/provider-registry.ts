/**
 * `TableProviderRegistry`: the provider registry backed by a table of `ProviderSpec` rows (by
 * default the OpenAI-compatible providers), looked up by slug in a Map, with the custom-host SSRF
 * guard of `custom-host-policy.ts` behind `checkCustomHost`.
 */
import type { CustomHostCheck, ProviderRegistry, ProviderSpec } from '../../core/ports.js'
import { CustomHostPolicy, type HostResolver } from './custom-host-policy.js'
import { OPENAI_COMPATIBLE_PROVIDERS } from './openai-compatible-providers.js'

export interface TableProviderRegistryOptions {
  /** `GATEWAY_ALLOWED_CUSTOM_HOSTS` entries: host names, `*.suffix`, IP addresses, CIDR ranges. */
  readonly allowedCustomHosts: readonly string[]
  /** The provider table; defaults to `OPENAI_COMPATIBLE_PROVIDERS` (the only table the composition root registers today). */
  readonly providers?: readonly ProviderSpec[]
  /** Host name resolver for custom hosts; defaults to the system resolver. */
  readonly resolveHost?: HostResolver
}

export class TableProviderRegistry implements ProviderRegistry {
  private readonly bySlug: ReadonlyMap<string, ProviderSpec>
  private readonly all: readonly ProviderSpec[]
  private readonly policy: CustomHostPolicy

  /** Throws on a duplicate slug or an allow-list entry it cannot read (boot fails with the message). */
  constructor(options: TableProviderRegistryOptions) {
    const providers = options.providers ?? OPENAI_COMPATIBLE_PROVIDERS
    const bySlug = new Map<string, ProviderSpec>()
    for (const spec of providers) {
      if (bySlug.has(spec.slug)) throw new Error(`provider registry: duplicate provider slug "${spec.slug}"`)
      bySlug.set(spec.slug, spec)
    }
    this.bySlug = bySlug
    this.all = Object.freeze([...providers])
    this.policy = new CustomHostPolicy({
      allowList: options.allowedCustomHosts,
      ...(options.resolveHost === undefined ? {} : { resolve: options.resolveHost }),
    })
  }

  get(slug: string): ProviderSpec | undefined {
    return this.bySlug.get(slug)
  }

  list(): readonly ProviderSpec[] {
    return this.all
  }

  checkCustomHost(url: string): CustomHostCheck | Promise<CustomHostCheck> {
    return this.policy.check(url)
  }
}
