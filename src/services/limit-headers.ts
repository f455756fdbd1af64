import type { KeyLimits } from '../domain/key.js';
import { CountText } from './limit-header-text.js';
import type { Window } from './limit-window.js';

/**
 * OpenAI's x-ratelimit-* response headers for a key with an rpm or a tpm: which trios it carries,
 * and their values as of its latest request.
 */

/** The x-ratelimit-* values last sent for a key. */
export class HeaderTexts {
  readonly limitRequests = new CountText();
  readonly remainingRequests = new CountText();
  readonly limitTokens = new CountText();
  readonly remainingTokens = new CountText();
}

/**
 * Response headers as Node's `writeHead` takes them fastest: names and values in turn, in one
 * array (an object's are read by name, megamorphic keyed loads in Node's header loop).
 */
export type HeaderList = readonly string[];

/** A key with only a concurrency limit has no x-ratelimit-* header: one empty list for all. */
export const NO_HEADERS: HeaderList = Object.freeze([]);

/** Which x-ratelimit-* trios a key's answers carry: 1 the requests', 2 the tokens', 3 both. */
export type HeaderKind = 0 | 1 | 2 | 3;

const REQUEST_TRIO = [
  'x-ratelimit-limit-requests',
  '',
  'x-ratelimit-remaining-requests',
  '',
  'x-ratelimit-reset-requests',
  '',
];
const TOKEN_TRIO = ['x-ratelimit-limit-tokens', '', 'x-ratelimit-remaining-tokens', '', 'x-ratelimit-reset-tokens', ''];

/** A key's header list for `kind`, every header in it, in OpenAI's order (its values are set at each request). */
function headerList(kind: HeaderKind): string[] {
  if (kind === 3) return [...REQUEST_TRIO, ...TOKEN_TRIO];
  if (kind === 1) return [...REQUEST_TRIO];
  return [...TOKEN_TRIO];
}

/** What of a key's state its headers are made from (KeyState). */
export interface HeaderSource {
  readonly requests: Window;
  readonly tokens: Window;
  /** Tokens reserved by the key's answers under way: counted against its tpm with those charged. */
  readonly reserved: number;
  readonly texts: HeaderTexts;
  headers: string[];
  headerKind: HeaderKind;
  /** The length of the tail the list was made with (0: none). */
  tailLength: number;
}

/** On a shared store: the other daemons' counts for the key at the last snapshot. */
export interface OthersCounts {
  readonly othersRequests: number;
  readonly othersTokens: number;
}

/**
 * The x-ratelimit-* header lists of one limiter's keys. Its window's length is fixed for its
 * life: held here once, not handed over with every request.
 */
export class KeyHeaders {
  constructor(private readonly windowMs: number) {}

  /**
   * The key's header list with its values as of now, and `tail` (headers every answer to the key
   * carries besides, such as its pack's end) at its end. One list per key, not one per request
   * (each request's object was 83 bytes, and more when merged into its answer's): every answer of
   * the key writes it as it is when the answer is written. The values are strings kept per key
   * (`HeaderTexts`, and the reset per millisecond): only what changed is formatted again.
   */
  of(
    limits: KeyLimits,
    s: HeaderSource,
    now: number,
    c: OthersCounts | null,
    tail: HeaderList | null = null,
  ): HeaderList {
    const w = this.windowMs;
    const { rpm, tpm } = limits;
    const kind = ((rpm === null ? 0 : 1) | (tpm === null ? 0 : 2)) as HeaderKind;
    if (kind === 0) return tail ?? NO_HEADERS;
    const tailLength = tail === null ? 0 : tail.length;
    // A new list when the key's limits change which trios it has, or its tail its length: an
    // answer already under way keeps the list it was given, with the values of the key's last
    // request before the change.
    if (kind !== s.headerKind || tailLength !== s.tailLength) {
      s.headers = headerList(kind);
      for (let i = 0; i < tailLength; i++) s.headers.push('');
      s.headerKind = kind;
      s.tailLength = tailLength;
    }
    const h = s.headers;
    for (let i = 0, at = h.length - tailLength; i < tailLength; i++) h[at + i] = tail![i]!;
    const t = s.texts;
    // Remaining: the cluster's as far as this daemon knows (the others' counts at the last snapshot).
    if (rpm !== null) {
      const used = s.requests.count + (c === null ? 0 : c.othersRequests);
      h[1] = t.limitRequests.of(rpm);
      h[3] = t.remainingRequests.of(Math.max(0, rpm - used));
      h[5] = s.requests.reset(now, w);
    }
    if (tpm !== null) {
      // The tokens' trio follows the requests' when the key has both.
      const at = rpm === null ? 0 : 6;
      const used = s.tokens.count + s.reserved + (c === null ? 0 : c.othersTokens);
      h[at + 1] = t.limitTokens.of(tpm);
      h[at + 3] = t.remainingTokens.of(Math.max(0, tpm - used));
      h[at + 5] = s.tokens.reset(now, w, tpm);
    }
    return h;
  }
}
