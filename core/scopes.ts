/**
 * The scope catalogue (API.md §1, reference/admin-api.md §2.3-2.4). Scopes are `<resource>.<action>`;
 * `list` does not imply `read`; a route names the scopes that admit it and a key needs any one.
 * A `gateway.` prefix (allowed in JWTs) is removed before comparison.
 */

function expand(resource: string, actions: readonly string[]): string[] {
  return actions.map((action) => `${resource}.${action}`)
}

const CRUDL = ['create', 'read', 'update', 'delete', 'list'] as const

/** Scopes an organisation (Admin API) key may hold. */
export const ADMIN_KEY_SCOPES: readonly string[] = Object.freeze([
  ...expand('organisation_users', CRUDL),
  ...expand('organisation_service_api_keys', [...CRUDL, 'rotate']),
  ...expand('organisation_settings', ['read', 'update']),
  'audit_logs.list',
  ...expand('workspaces', CRUDL),
  ...expand('workspace_service_api_keys', [...CRUDL, 'rotate']),
  ...expand('workspace_user_api_keys', [...CRUDL, 'rotate']),
  ...expand('workspace_users', CRUDL),
  ...expand('prompts', [...CRUDL, 'publish']),
  ...expand('configs', CRUDL),
  ...expand('virtual_keys', [...CRUDL, 'duplicate', 'copy']),
  ...expand('providers', CRUDL),
  ...expand('policies', CRUDL),
  'analytics.view',
  'logs.export',
  'logs.list',
  'logs.view',
])

/** Scopes a workspace key (service or user) may hold. */
export const WORKSPACE_KEY_SCOPES: readonly string[] = Object.freeze([
  ...expand('workspace_service_api_keys', [...CRUDL, 'rotate']),
  ...expand('workspace_user_api_keys', [...CRUDL, 'rotate']),
  ...expand('workspaces', ['read', 'update', 'list']),
  ...expand('workspace_users', CRUDL),
  'completions.write',
  'completions.read',
  ...expand('prompts', [...CRUDL, 'publish', 'render']),
  ...expand('configs', CRUDL),
  ...expand('virtual_keys', [...CRUDL, 'duplicate', 'copy']),
  ...expand('providers', CRUDL),
  ...expand('policies', CRUDL),
  'analytics.view',
  'logs.export',
  'logs.list',
  'logs.view',
  'logs.write',
  'logs.read',
  'feedbacks.read',
  'feedbacks.write',
])

/** Removes the optional `gateway.` prefix. */
export function normaliseScope(scope: string): string {
  return scope.startsWith('gateway.') ? scope.slice('gateway.'.length) : scope
}
