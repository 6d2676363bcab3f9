/** The limit subjects (API.md §6) of a caller: its API key and its workspace. */
import type { ApiKeyRecord, WorkspaceRecord } from '../../core/admin-records.js'
import type { LimitSubject } from '../../core/limits.js'

export function apiKeySubject(key: ApiKeyRecord): LimitSubject {
  return {
    kind: 'api-key',
    id: key.id,
    label: `API key ${key.maskedKey}`,
    rateLimits: key.rateLimits,
    usageLimits: key.usageLimits === null ? [] : [key.usageLimits],
  }
}

export function workspaceSubject(workspace: WorkspaceRecord): LimitSubject {
  return {
    kind: 'workspace',
    id: workspace.id,
    label: `workspace ${workspace.slug}`,
    rateLimits: workspace.rateLimits,
    usageLimits: workspace.usageLimits,
  }
}

/** The key's subject, then its workspace's when there is one. */
export function subjectsOf(key: ApiKeyRecord, workspace: WorkspaceRecord | null): LimitSubject[] {
  return workspace === null ? [apiKeySubject(key)] : [apiKeySubject(key), workspaceSubject(workspace)]
}
