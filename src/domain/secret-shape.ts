/*
 * What a secret looks like, with nothing else loaded: the CLI checks its arguments with it before
 * any command runs (api-key.ts, which mints secrets, loads nanoid and node:crypto).
 */

/** Pattern for scanners and for tests that prove no secret leaked. */
export const SECRET_PATTERN = /ob_sk_[0-9A-Za-z]{12}_[0-9A-Za-z]{38}/;

const PREFIX_LEN = 'ob_sk_'.length;
const ID_LEN = 12;

/**
 * The key id inside a secret that `text` holds (a secret pasted where an id or a name was asked
 * for), or null. The id is public: saying it lets a message name the key without the secret.
 */
export function keyIdInSecret(text: string): string | null {
  const found = SECRET_PATTERN.exec(text);
  return found === null ? null : found[0].slice(PREFIX_LEN, PREFIX_LEN + ID_LEN);
}
