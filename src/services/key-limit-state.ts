import type { KeyLimits } from '../domain/key.js';
import { type HeaderKind, HeaderTexts } from './limit-headers.js';
import type { ClusterView } from './limit-shares.js';
import { Window } from './limit-window.js';

/** One key's counts in a KeyLimiter: its windows, what is in flight and reserved, its promises. */
export class KeyState {
  readonly requests: Window;
  readonly tokens: Window;
  readonly texts = new HeaderTexts();
  /** The key's x-ratelimit-* headers (`KeyHeaders`), and which limits they are for. */
  headers: string[] = [];
  headerKind: HeaderKind = 0;
  /** The length of the tail the list was made with (0: none). */
  tailLength = 0;
  inflight = 0;
  /**
   * Tokens reserved by the key's answers under way (`reserve`): counted against its tpm with what
   * was charged, until each answer is over and its real usage is charged instead.
   */
  reserved = 0;
  /** Tokens reserved in all, and as of the last capture: demand, for the promises (shared store). */
  reservedAsked = 0;
  reservedAtCapture = 0;
  /** When a refusal was last reported (logged), so that it is once per window, not per request. */
  reportedAt = Number.NEGATIVE_INFINITY;
  // Shared store only (see capsOf).
  /** The key's limits as last seen, for the capture. */
  limits: KeyLimits | null = null;
  /** Requests asked (admitted or refused) and tokens charged, in all, and as of the last capture. */
  asked = 0;
  askedAtCapture = 0;
  charged = 0;
  chargedAtCapture = 0;
  lastAskedAt = Number.NEGATIVE_INFINITY;
  /**
   * What this daemon promised the others at each capture not yet in a snapshot. A key counted
   * since the last capture was left out of it: a promise of nothing, until that snapshot is read.
   */
  promises: LimitPromise[];
  /** This daemon's caps, worked out once per snapshot, capture and window. */
  caps: Caps | null = null;

  constructor(aligned: boolean, lastCapture: number, window: number) {
    this.requests = new Window(aligned);
    this.tokens = new Window(aligned);
    this.promises = [{ tick: lastCapture, window, requests: 0, tokens: 0, inflight: 0, xRequests: 0, xTokens: 0 }];
  }
}

/**
 * At a capture, a daemon promises to stay within its counts plus `x*` more until the snapshot
 * of that capture is read (in another window: within `x*`): the others split only what nobody
 * promised, so a share given never overlaps one being spent.
 */
export interface LimitPromise {
  tick: number;
  window: number;
  requests: number;
  tokens: number;
  inflight: number;
  xRequests: number;
  xTokens: number;
}

/**
 * What this daemon may reach: its promise plus its share of what was left at the last snapshot,
 * and within its promises since (`others*`: the other daemons' counts, for the headers and to
 * tell a full window from a spent share).
 */
export interface Caps {
  snapshot: ClusterView | null;
  limits: KeyLimits;
  window: number;
  requests: number;
  tokens: number;
  inflight: number;
  othersRequests: number;
  othersTokens: number;
  /** Requests the other daemons were asked for the key in the period before the snapshot. */
  othersAsked: number;
  /** From the snapshot alone (before the promises since): what the next promise may reach. */
  share: { requests: number; tokens: number; inflight: number };
}

/** Tokens counted against a key's tpm: charged in its window, and reserved by its answers under way. */
export function tokensUsed(s: KeyState): number {
  return s.tokens.count + s.reserved;
}
