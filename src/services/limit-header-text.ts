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
      this.text = String(n);
    }
    return this.text;
  }
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
