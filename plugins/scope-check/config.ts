import { z } from 'zod'

/** scope-check has no settings yet; the route → scopes table lives in core/routes.ts. */
export const scopeCheckConfigSchema = z.object({}).strict()

export type ScopeCheckConfig = z.infer<typeof scopeCheckConfigSchema>
