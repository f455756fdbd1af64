/**
 * The values of the x-ratelimit-* and Retry-After headers as text, made without the allocations
 * a request of a key with limits would otherwise pay for each.
 */

/** A count as a header value, remade only when it changes: most of a key's values repeat from one request to the next. */
export class CountText {
  private n = -1;
  private text = '';

  of(n: number): string {
    if (n !== this.n) {
      this.n = n;
      this.text = decimal(n);
    }
    return this.text;
  }
}

const THREE_DIGITS = Array.from({ length: 1000 }, (_, i) => String(i).padStart(3, '0'));

/**
 * `String(n)`, for a count that is new at each request (what remains of a key's window). V8 keeps
 * the string of every number `String` converts in a cache that outlives the young generation's
 * collections, so each such string was copied to the old generation: 32 bytes a request of a key
 * with an rpm, the most any part of `--ops` promoted (docs/performance.md, "What each optimisation bought"). Made here
 * of groups of three digits: the first group is `String` of a number below 1,000 (a thousand
 * strings at most, cached once), the others come from the table, and the joined string is not
 * cached at all.
 */
export function decimal(n: number): string {
  if (n < 1000 || !Number.isSafeInteger(n)) return String(n);
  const high = Math.floor(n / 1000);
  return decimal(high) + (THREE_DIGITS[n - high * 1000] as string);
}

/**
 * A duration as OpenAI writes its reset headers: `20ms`, `1s`, `8.64s`, `6m0s`. Integer
 * arithmetic, not `toFixed`: it runs for every request of a key with limits, and `toFixed` with
 * the conversions around it took about a microsecond.
 */
export function formatReset(ms: number): string {
  const whole = Math.ceil(ms);
  if (whole < 1000) return `${whole}ms`;
  const minutes = Math.floor(whole / 60_000);
  const rest = whole - minutes * 60_000;
  const seconds = Math.floor(rest / 1000);
  let frac = rest - seconds * 1000;
  let text = `${seconds}`;
  if (frac !== 0) {
    let digits = 3;
    while (frac % 10 === 0) {
      frac /= 10;
      digits--;
    }
    text += `.${String(frac).padStart(digits, '0')}`;
  }
  return minutes > 0 ? `${minutes}m${text}s` : `${text}s`;
}

/** Retry-After in whole seconds, never 0 (a client would retry at once). */
export function retryAfterSeconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}
