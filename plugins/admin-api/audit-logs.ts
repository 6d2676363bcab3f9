/**
 * `GET /v1/audit-logs` (API.md §5 "audit logs"): the caller's organisation's audit entries, newest
 * first, filtered and paged. Admin API keys only (`audit_logs.list`), enforced by the route table.
 * Entries are stored by admin-api (with each change) and by the audit plugin (refusals, failures).
 */
import type { AuditEntry, AuditFilter } from '../../core/admin-records.js'
import type { GatewayError } from '../../core/errors.js'
import { jsonReply, type Reply } from '../../core/plugin.js'
import { invalid, pageOf, parseQuery, type AdminRequest, type HandlerMap } from './request.js'
import { listAuditLogsQuery } from './schemas.js'
import { listView } from './views.js'

/** One entry on the wire. `request_body` and `query_params` stay the JSON texts that were stored. */
export function auditLogView(entry: AuditEntry, workspace: string | null): Record<string, unknown> {
  return {
    object: 'audit-log',
    id: entry.id,
    timestamp: entry.timestamp,
    method: entry.method,
    uri: entry.uri,
    request_id: entry.requestId,
    request_body: entry.requestBody,
    query_params: entry.queryParams,
    user_id: entry.userId,
    user_type: entry.userType,
    api_key_id: entry.apiKeyId,
    organisation_id: entry.organisationId,
    workspace_id: workspace,
    response_status_code: entry.responseStatusCode,
    resource_type: entry.resourceType,
    action: entry.action,
    resource_id: entry.resourceId,
    client_ip: entry.clientIp,
  }
}

async function listAuditLogs(request: AdminRequest): Promise<Reply | GatewayError> {
  const query = parseQuery(request.ctx, listAuditLogsQuery)
  if (!query.ok) return query.error
  const { deps, principal } = request
  const input = query.value
  const startTime = input.start_time === undefined ? undefined : new Date(input.start_time).toISOString()
  const endTime = input.end_time === undefined ? undefined : new Date(input.end_time).toISOString()
  if (startTime !== undefined && endTime !== undefined && startTime > endTime) return invalid('end_time: must not be before start_time', 'end_time')

  let workspaceId: string | undefined
  if (input.workspace_id !== undefined) {
    // Entries hold workspace UUIDs. A slug is resolved; a UUID of a deleted workspace is kept as
    // is, so its history stays findable. Anything else matches no entry: an empty list.
    const workspace = await deps.store.findWorkspace(principal.organisationId, input.workspace_id)
    workspaceId = workspace?.id ?? input.workspace_id
  }

  const filter: AuditFilter = {
    ...(startTime === undefined ? {} : { startTime }),
    ...(endTime === undefined ? {} : { endTime }),
    ...(input.method === undefined ? {} : { method: input.method }),
    ...(input.uri === undefined ? {} : { uri: input.uri }),
    ...(input.request_id === undefined ? {} : { requestId: input.request_id }),
    ...(input.user_id === undefined ? {} : { userId: input.user_id }),
    ...(input.user_type === undefined ? {} : { userType: input.user_type }),
    ...(input.api_key_id === undefined ? {} : { apiKeyId: input.api_key_id }),
    ...(workspaceId === undefined ? {} : { workspaceId }),
    ...(input.resource_type === undefined ? {} : { resourceType: input.resource_type }),
    ...(input.action === undefined ? {} : { action: input.action }),
    ...(input.response_status_code === undefined ? {} : { responseStatusCode: input.response_status_code }),
    ...(input.client_ip === undefined ? {} : { clientIp: input.client_ip }),
  }
  const page = await deps.store.listAuditEntries(principal.organisationId, filter, pageOf(input.current_page, input.page_size))

  // Workspaces are shown by slug while they exist; one look-up per distinct workspace on the page.
  const slugs = new Map<string, string>()
  for (const id of new Set(page.items.map((entry) => entry.workspaceId))) {
    if (id === null) continue
    const workspace = await deps.store.findWorkspace(principal.organisationId, id)
    slugs.set(id, workspace?.id === id ? workspace.slug : id)
  }
  const data = page.items.map((entry) => auditLogView(entry, entry.workspaceId === null ? null : (slugs.get(entry.workspaceId) ?? entry.workspaceId)))
  return jsonReply(200, listView(page.total, data))
}

export const auditLogHandlers: HandlerMap = {
  'audit-logs.list': listAuditLogs,
}
