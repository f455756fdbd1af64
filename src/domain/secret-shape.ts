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

/**
 * What may be a secret however it was changed on the way (upper-cased by a form, a character lost
 * in a paste): `ob_sk_` in any case, then a letter or digit. Such text is never said back: a
 * case-changed secret with its checksum gives its casing back to anyone who tries the few
 * combinations offline. A hint (`ob_sk_…a1B2`) is not one.
 */
const SECRET_LIKE = /ob_sk_[0-9a-z]/i;
const SECRET_LIKE_RUN = /ob_sk_[0-9a-z]\S*/gi;

export function looksLikeSecret(text: string): boolean {
  return SECRET_LIKE.test(text);
}

/** What stands in a message for text that looks like a secret. */
export const WITHHELD = "[what looks like a key's secret, not shown]";

/** `text` with every run that looks like a secret replaced by WITHHELD. */
export function withoutSecrets(text: string): string {
  return looksLikeSecret(text) ? text.replace(SECRET_LIKE_RUN, WITHHELD) : text;
}
