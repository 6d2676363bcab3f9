/**
 * Connection-level helpers of the MongoDB adapters: which database a URI names, whether the
 * deployment can run multi-document transactions, and creating the admin collections and indexes.
 */
import type { Db, Document } from 'mongodb'
import { ADMIN_COLLECTIONS, ADMIN_COLLECTION_SPECS, indexDescription } from './mongo-admin-collections.js'

/** Used when neither the options nor the URI name a database. */
export const DEFAULT_DATABASE_NAME = 'gateway'

const SCHEME = /^mongodb(?:\+srv)?:\/\//i
const NAMESPACE_EXISTS = 48

/**
 * The database named in the path of a `mongodb://` or `mongodb+srv://` URI, or `null`. Parsed by
 * hand because `new URL` rejects a host list (`h1:27017,h2:27017`); the connection-string spec
 * requires `/`, `?` and `@` inside credentials and socket paths to be percent-encoded, so the
 * first `?` ends the path and the last `@` before it ends the credentials.
 */
export function databaseNameOf(uri: string): string | null {
  const scheme = SCHEME.exec(uri)
  if (scheme === null) return null
  const rest = uri.slice(scheme[0].length)
  const query = rest.indexOf('?')
  const beforeQuery = query < 0 ? rest : rest.slice(0, query)
  const hostsAndPath = beforeQuery.slice(beforeQuery.lastIndexOf('@') + 1)
  const slash = hostsAndPath.indexOf('/')
  if (slash < 0) return null
  const encoded = hostsAndPath.slice(slash + 1)
  if (encoded === '') return null
  try {
    return decodeURIComponent(encoded)
  } catch {
    return null
  }
}

/**
 * Whether a `hello` reply comes from a replica-set member or a mongos: the deployments that run
 * multi-document transactions (a standalone mongod does not).
 */
export function supportsTransactions(hello: Document): boolean {
  return typeof hello.setName === 'string' || hello.msg === 'isdbgrid'
}

/** Creates the admin collections and their indexes where missing; safe to run from several instances at once. */
export async function ensureAdminCollections(db: Db): Promise<void> {
  const existing = new Set(
    (await db.listCollections({}, { nameOnly: true }).toArray()).map((collection) => collection.name),
  )
  for (const spec of ADMIN_COLLECTION_SPECS) {
    const name = ADMIN_COLLECTIONS[spec.role]
    if (!existing.has(name)) {
      try {
        // Explicitly, because transactions cannot create collections on servers before 4.4.
        await db.createCollection(name)
      } catch (error) {
        // Another instance starting at the same time created it first.
        if ((error as { code?: unknown }).code !== NAMESPACE_EXISTS) throw error
      }
    }
    if (spec.indexes.length > 0) await db.collection(name).createIndexes(spec.indexes.map(indexDescription))
  }
}
