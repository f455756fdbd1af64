import { hash } from 'node:crypto';
import { crc32 } from 'node:zlib';
import { customAlphabet } from 'nanoid';

/**
 * Secret format, after GitHub's tokens: `ob_sk_<id:12>_<random:32><crc:6>`, all base62.
 * - the public id names the key record without revealing the secret;
 * - 32 base62 characters from a CSPRNG carry 190 bits;
 * - the CRC32 checksum lets tools tell a mistyped key from a revoked one, and lets secret
 *   scanners match ob-proxy keys with few false positives. The proxy itself checks only the
 *   length and prefix before its lookup: the CRC cost as much as the SHA-256, and a mistyped key
 *   misses the index all the same.
 * Only the SHA-256 of the whole secret is stored.
 */
export const KEY_PREFIX = 'ob_sk_';
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const ID_LEN = 12;
const RANDOM_LEN = 32;
const CRC_LEN = 6;
export const SECRET_LENGTH = KEY_PREFIX.length + ID_LEN + 1 + RANDOM_LEN + CRC_LEN;
const SECRET_RE = new RegExp(`^${KEY_PREFIX}[0-9A-Za-z]{${ID_LEN}}_[0-9A-Za-z]{${RANDOM_LEN + CRC_LEN}}$`);

export interface SecretSource {
  /** A public key id (base62). */
  keyId(): string;
  /** The random part of a secret (base62). */
  random(): string;
}

export const cryptoSecretSource: SecretSource = {
  keyId: customAlphabet(BASE62, ID_LEN),
  random: customAlphabet(BASE62, RANDOM_LEN),
};

function base62(n: number, width: number): string {
  let out = '';
  let v = n >>> 0;
  for (let i = 0; i < width; i++) {
    out = BASE62[v % 62] + out;
    v = Math.floor(v / 62);
  }
  return out;
}

function checksum(body: string): string {
  return base62(crc32(body), CRC_LEN);
}

export interface MintedSecret {
  keyId: string;
  secret: string;
  hash: string;
  hint: string;
}

export function mintSecret(source: SecretSource): MintedSecret {
  const keyId = source.keyId();
  const body = `${KEY_PREFIX}${keyId}_${source.random()}`;
  const secret = body + checksum(body);
  return { keyId, secret, hash: hashSecret(secret), hint: hintOf(secret) };
}

/** The length and prefix of a secret: enough to refuse garbage before hashing it. */
export function hasSecretShape(secret: string): boolean {
  return secret.length === SECRET_LENGTH && secret.startsWith(KEY_PREFIX);
}

/** Shape and checksum, no lookup: a mistyped key, told apart from a wrong one. */
export function isWellFormedSecret(secret: string): boolean {
  if (secret.length !== SECRET_LENGTH || !SECRET_RE.test(secret)) return false;
  const body = secret.slice(0, -CRC_LEN);
  return checksum(body) === secret.slice(-CRC_LEN);
}

/** One-shot hash: on the request path, building a Hash object cost twice the digest itself. */
export function hashSecret(secret: string): string {
  return hash('sha256', secret, 'hex');
}

export function hintOf(secret: string): string {
  return `${KEY_PREFIX}…${secret.slice(-4)}`;
}

export { SECRET_PATTERN, keyIdInSecret } from './secret-shape.js';
