import { describe, expect, it } from 'vitest';
import { MAX_EXCHANGE_TOKENS } from '../../src/wire/chat-response.js';
import {
  MEDIA_TOKENS,
  estimateCompletionTokens,
  estimatePromptTokens,
  learnPace,
} from '../../src/wire/prompt-estimate.js';

describe('token estimates for exchanges the model server never counted', () => {
  it('a prompt: a quarter of its length, each media part MEDIA_TOKENS instead of its size, at least 1', () => {
    expect(estimatePromptTokens(400, { parts: 0, chars: 0 })).toBe(100);
    expect(estimatePromptTokens(401, { parts: 0, chars: 0 })).toBe(101);
    expect(estimatePromptTokens(1_000_400, { parts: 2, chars: 1_000_000 })).toBe(100 + 2 * MEDIA_TOKENS);
    expect(estimatePromptTokens(0, { parts: 0, chars: 0 })).toBe(1);
  });

  it('a plain answer: the pace times the time, never past the request cap nor MAX_EXCHANGE_TOKENS', () => {
    expect(estimateCompletionTokens(0.01, 3000, null)).toBe(30);
    expect(estimateCompletionTokens(0.01, 3000, 12)).toBe(12);
    expect(estimateCompletionTokens(0, 3000, null)).toBe(0);
    expect(estimateCompletionTokens(0.01, -5, null)).toBe(0);
    // A hostile model server that reported 10^8 tokens in 50 ms, then a client left 10 s in.
    const pace = learnPace(0, MAX_EXCHANGE_TOKENS, 50);
    expect(estimateCompletionTokens(pace, 10_000, null)).toBe(MAX_EXCHANGE_TOKENS);
  });

  it('the pace: set by the first answer, then moved a fifth of the way; short or empty answers ignored', () => {
    expect(learnPace(0, 40, 4000)).toBe(0.01);
    expect(learnPace(0.01, 40, 50)).toBeCloseTo(0.168, 10);
    expect(learnPace(0.01, 40, 49)).toBe(0.01);
    expect(learnPace(0.01, 0, 4000)).toBe(0.01);
  });
});
