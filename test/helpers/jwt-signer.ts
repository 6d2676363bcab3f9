/**
 * An RS256 signing key with its public JWK, as an identity provider would hold one: for tests that
 * mint JWTs and hand the gateway the matching JWKS.
 */
import { exportJWK, generateKeyPair, type CryptoKey, type JWK } from 'jose'
import type { JsonWebKeySet } from '../../core/admin-records.js'

export interface Signer {
  readonly kid: string
  readonly privateKey: CryptoKey
  /** The public key as a JWK with `kid`, `alg: RS256` and `use: sig`. */
  readonly publicJwk: JWK
}

/** A fresh 2048-bit RS256 key pair named `kid`. */
export async function newSigner(kid: string): Promise<Signer> {
  const { privateKey, publicKey } = await generateKeyPair('RS256', { modulusLength: 2048, extractable: true })
  return { kid, privateKey, publicJwk: { ...(await exportJWK(publicKey)), kid, alg: 'RS256', use: 'sig' } }
}

/** The JWKS publishing the signers' public keys. */
export function jwksOf(...signers: readonly Signer[]): JsonWebKeySet {
  return { keys: signers.map((signer) => signer.publicJwk as Record<string, unknown>) }
}
