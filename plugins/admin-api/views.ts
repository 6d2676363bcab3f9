/** Admin store records → Admin API response objects (snake_case, `object` discriminators). */
import type { OrganisationRecord, WorkspaceRecord } from '../../core/ports.js'

export function organisationView(organisation: OrganisationRecord): Record<string, unknown> {
  return { object: 'organisation', id: organisation.id, name: organisation.name, created_at: organisation.createdAt }
}

/** A workspace's public id is its slug; its UUID is accepted wherever an id is. */
export function workspaceView(workspace: WorkspaceRecord): Record<string, unknown> {
  return {
    object: 'workspace',
    id: workspace.slug,
    slug: workspace.slug,
    name: workspace.name,
    description: workspace.description,
    created_at: workspace.createdAt,
    last_updated_at: workspace.lastUpdatedAt,
    defaults: null,
    usage_limits: [],
    rate_limits: [],
  }
}
