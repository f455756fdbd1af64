import { describe, expect, it } from 'vitest';
import {
  SECRET_LENGTH,
  SECRET_PATTERN,
  cryptoSecretSource,
  hasSecretShape,
  hashSecret,
  hintOf,
  isWellFormedSecret,
  mintSecret,
} from '../../src/domain/api-key.js';

describe('secret format', () => {
  it('mints ob_sk_<id>_<random><crc> with a SHA-256 hash and a hint of the last 4', () => {
    const m = mintSecret(cryptoSecretSource);
    expect(m.secret).toMatch(/^ob_sk_[0-9A-Za-z]{12}_[0-9A-Za-z]{38}$/);
    expect(m.secret).toHaveLength(SECRET_LENGTH);
    expect(m.secret.slice(6, 18)).toBe(m.keyId);
    expect(m.hash).toBe(hashSecret(m.secret));
    expect(m.hash).toMatch(/^[0-9a-f]{64}$/);
    expect(m.hint).toBe(`ob_sk_…${m.secret.slice(-4)}`);
    expect(hintOf(m.secret)).toBe(m.hint);
    expect(SECRET_PATTERN.test(m.secret)).toBe(true);
  });

  it('takes its random part from the CSPRNG source: 32 base62 characters, never repeated', () => {
    const randoms = Array.from({ length: 2000 }, () => mintSecret(cryptoSecretSource).secret.slice(19, 51));
    for (const r of randoms) expect(r).toMatch(/^[0-9A-Za-z]{32}$/);
    expect(new Set(randoms).size).toBe(2000);
    // Every base62 character turns up at every position over 2000 draws unless the source is skewed.
    const firstChars = new Set(randoms.map((r) => r[0]));
    expect(firstChars.size).toBe(62);
  });

  it('the request path refuses by length and prefix only; the CRC lets tools and scanners tell a typo', () => {
    const { secret } = mintSecret(cryptoSecretSource);
    expect(hasSecretShape(secret)).toBe(true);
    expect(hasSecretShape(secret.slice(0, -1))).toBe(false);
    expect(hasSecretShape(secret.replace('ob_sk_', 'ob_pk_'))).toBe(false);
    // A typo keeps the shape (the lookup refuses it), and the checksum names it as a typo.
    const typo = secret.slice(0, 25) + (secret[25] === 'a' ? 'b' : 'a') + secret.slice(26);
    expect(hasSecretShape(typo)).toBe(true);
    expect(isWellFormedSecret(typo)).toBe(false);
  });

  it('isWellFormedSecret: shape and checksum, no lookup', () => {
    const { secret } = mintSecret(cryptoSecretSource);
    expect(isWellFormedSecret(secret)).toBe(true);
    const i = 25;
    const flipped = secret.slice(0, i) + (secret[i] === 'a' ? 'b' : 'a') + secret.slice(i + 1);
    expect(isWellFormedSecret(flipped)).toBe(false);
    expect(isWellFormedSecret(secret.slice(0, -1))).toBe(false);
    expect(isWellFormedSecret(`${secret}x`)).toBe(false);
    expect(isWellFormedSecret('ob_sk_')).toBe(false);
    expect(isWellFormedSecret(secret.replace('ob_sk_', 'ob_pk_'))).toBe(false);
  });

  it('is deterministic given an injected source', () => {
    const src = { keyId: () => 'AAAAAAAAAAAA', random: () => 'B'.repeat(32) };
    expect(mintSecret(src).secret).toBe(mintSecret(src).secret);
    expect(isWellFormedSecret(mintSecret(src).secret)).toBe(true);
  });
});
