/**
 * Query documents for the admin store's list filters (core/admin-records.ts documents each filter),
 * built as plain data so they are testable without a server. Caller text only ever reaches a
 * `$regex` through `escapeRegex`.
 */
import type { Filter } from 'mongodb'
import type {
  ApiKeyFilter,
  AuditFilter,
  CollectionFilter,
  ConfigFilter,
  InviteFilter,
  LabelFilter,
  PartialFilter,
  PromptFilter,
  UserFilter,
  VirtualKeyFilter,
  WorkspaceFilter,
} from '../../core/admin-records.js'
import type {
  ApiKeyDocument,
  AuditDocument,
  CollectionDocument,
  ConfigDocument,
  InviteDocument,
  LabelDocument,
  MemberDocument,
  PartialDocument,
  PromptDocument,
  UserDocument,
  VirtualKeyDocument,
  WorkspaceDocument,
} from './mongo-admin-collections.js'
import { toDate } from './mongo-admin-documents.js'

// Every character PCRE treats specially outside a character class, plus `-` and `/` for good measure.
const REGEX_SPECIAL = /[\\^$.*+?()[\]{}|\-/]/g

/**
 * `text` as a regular expression matching exactly that text. NUL becomes `\x00` because the
 * server refuses a pattern with an embedded NUL byte (and BSON regexes are C strings).
 */
export function escapeRegex(text: string): string {
  return text.replace(REGEX_SPECIAL, '\\$&').replaceAll('\0', '\\x00')
}

export function userQuery(organisationId: string, filter: UserFilter): Filter<UserDocument> {
  return {
    organisation_id: organisationId,
    ...(filter.role === undefined ? {} : { role: filter.role }),
    ...(filter.email === undefined ? {} : { email: filter.email }),
  }
}

export function workspaceQuery(organisationId: string, filter: WorkspaceFilter): Filter<WorkspaceDocument> {
  const name: { $regex?: string; $eq?: string } = {}
  // Case-sensitive substring: no `i` option, no anchors.
  if (filter.name !== undefined) name.$regex = escapeRegex(filter.name)
  if (filter.exactName !== undefined) name.$eq = filter.exactName
  return {
    organisation_id: organisationId,
    ...(Object.keys(name).length === 0 ? {} : { name }),
    ...(filter.ids === undefined ? {} : { _id: { $in: [...filter.ids] } }),
  }
}

/** `userIds` are the users whose email matched the member filter's `email` (`null`: no email filter). */
export function memberQuery(
  workspaceId: string,
  role: MemberDocument['role'] | undefined,
  userIds: readonly string[] | null,
): Filter<MemberDocument> {
  return {
    workspace_id: workspaceId,
    ...(role === undefined ? {} : { role }),
    ...(userIds === null ? {} : { user_id: { $in: [...userIds] } }),
  }
}

/** `now` decides which pending invites are `expired` (`expiresAt <= now`) rather than `pending`. */
export function inviteQuery(organisationId: string, filter: InviteFilter, now: string): Filter<InviteDocument> {
  const query: Filter<InviteDocument> = {
    organisation_id: organisationId,
    ...(filter.role === undefined ? {} : { role: filter.role }),
    ...(filter.email === undefined ? {} : { email: filter.email }),
  }
  switch (filter.status) {
    case undefined:
      return query
    case 'pending':
      return { ...query, state: 'pending', expires_at: { $gt: toDate(now, 'now') } }
    case 'expired':
      return { ...query, state: 'pending', expires_at: { $lte: toDate(now, 'now') } }
    default:
      return { ...query, state: filter.status }
  }
}

export function apiKeyQuery(organisationId: string, filter: ApiKeyFilter): Filter<ApiKeyDocument> {
  return {
    organisation_id: organisationId,
    ...(filter.workspaceId === undefined ? {} : { workspace_id: filter.workspaceId }),
    ...(filter.types === undefined ? {} : { type: { $in: [...filter.types] } }),
  }
}

export function virtualKeyQuery(organisationId: string, filter: VirtualKeyFilter): Filter<VirtualKeyDocument> {
  return {
    organisation_id: organisationId,
    ...(filter.workspaceId === undefined ? {} : { workspace_id: filter.workspaceId }),
  }
}

/** Case-insensitive substring of any of `fields` (the `search` of the prompt, collection and label filters). */
function searchCondition(search: string, fields: readonly string[]): Record<string, unknown> {
  const pattern = { $regex: escapeRegex(search), $options: 'i' }
  return { $or: fields.map((field) => ({ [field]: pattern })) }
}

export function collectionQuery(organisationId: string, filter: CollectionFilter): Filter<CollectionDocument> {
  return {
    organisation_id: organisationId,
    ...(filter.workspaceId === undefined ? {} : { workspace_id: filter.workspaceId }),
    ...(filter.search === undefined ? {} : searchCondition(filter.search, ['name', 'slug'])),
  }
}

export function promptQuery(organisationId: string, filter: PromptFilter): Filter<PromptDocument> {
  return {
    organisation_id: organisationId,
    ...(filter.workspaceId === undefined ? {} : { workspace_id: filter.workspaceId }),
    ...(filter.collectionId === undefined ? {} : { collection_id: filter.collectionId }),
    ...(filter.search === undefined ? {} : searchCondition(filter.search, ['name', 'slug'])),
  }
}

/** A workspace's labels are its own and the built-in ones; both conditions are `$or`s, hence `$and`. */
export function labelQuery(organisationId: string, filter: LabelFilter): Filter<LabelDocument> {
  const conditions: Array<Record<string, unknown>> = []
  if (filter.workspaceId !== undefined) conditions.push({ $or: [{ workspace_id: filter.workspaceId }, { is_universal: true }] })
  if (filter.search !== undefined) conditions.push(searchCondition(filter.search, ['name']))
  return { organisation_id: organisationId, ...(conditions.length === 0 ? {} : { $and: conditions }) } as Filter<LabelDocument>
}

export function partialQuery(organisationId: string, filter: PartialFilter): Filter<PartialDocument> {
  return {
    organisation_id: organisationId,
    ...(filter.workspaceId === undefined ? {} : { workspace_id: filter.workspaceId }),
    ...(filter.collectionId === undefined ? {} : { collection_id: filter.collectionId }),
  }
}

export function configQuery(organisationId: string, filter: ConfigFilter): Filter<ConfigDocument> {
  return {
    organisation_id: organisationId,
    ...(filter.workspaceId === undefined ? {} : { workspace_id: filter.workspaceId }),
    ...(filter.isDefault === undefined ? {} : { is_default: filter.isDefault }),
  }
}

/** The documents (API keys, workspaces) of the organisation whose default config is one of `refs`. */
export function configDependantQuery(organisationId: string, refs: readonly string[]): { organisation_id: string; 'defaults.config_id': { $in: string[] } } {
  return { organisation_id: organisationId, 'defaults.config_id': { $in: [...refs] } }
}

/** Exact path: the stored URI is that path, with or without a query string. `*` at the end: a prefix. */
function uriCondition(uri: string): Filter<AuditDocument> {
  if (uri.endsWith('*')) return { uri: { $regex: `^${escapeRegex(uri.slice(0, -1))}` } }
  return { $or: [{ uri }, { uri: { $regex: `^${escapeRegex(`${uri}?`)}` } }] }
}

export function auditQuery(organisationId: string, filter: AuditFilter): Filter<AuditDocument> {
  const timestamp: { $gte?: Date; $lte?: Date } = {}
  if (filter.startTime !== undefined) timestamp.$gte = toDate(filter.startTime, 'startTime')
  if (filter.endTime !== undefined) timestamp.$lte = toDate(filter.endTime, 'endTime')
  const exact: Array<[keyof AuditFilter, keyof AuditDocument]> = [
    ['method', 'method'],
    ['requestId', 'request_id'],
    ['userId', 'user_id'],
    ['userType', 'user_type'],
    ['apiKeyId', 'api_key_id'],
    ['workspaceId', 'workspace_id'],
    ['resourceType', 'resource_type'],
    ['action', 'action'],
    ['responseStatusCode', 'response_status_code'],
    ['clientIp', 'client_ip'],
  ]
  const query: Record<string, unknown> = { organisation_id: organisationId }
  if (Object.keys(timestamp).length > 0) query.timestamp = timestamp
  for (const [from, to] of exact) {
    const value = filter[from]
    if (value !== undefined) query[to] = value
  }
  if (filter.uri !== undefined) Object.assign(query, uriCondition(filter.uri))
  return query as Filter<AuditDocument>
}
