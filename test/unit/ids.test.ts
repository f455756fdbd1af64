import { describe, expect, it } from 'vitest';
import { completionId, messageId, prefixedId, requestId, responseId, textCompletionId } from '../../src/ids.js';

describe('ids', () => {
  it('are their prefix and 24 base62 characters, unique across many pool refills', () => {
    const makers: [() => string, string][] = [
      [requestId, 'req_'],
      [completionId, 'chatcmpl-'],
      [textCompletionId, 'cmpl-'],
      [responseId, 'resp_'],
      [messageId, 'msg_'],
      [() => prefixedId('call'), 'call_'],
    ];
    const seen = new Set<string>();
    for (let i = 0; i < 2_000; i++) {
      for (const [make, prefix] of makers) {
        const id = make();
        expect(id.slice(0, prefix.length)).toBe(prefix);
        expect(id.slice(prefix.length)).toMatch(/^[0-9A-Za-z]{24}$/);
        seen.add(id);
      }
    }
    expect(seen.size).toBe(2_000 * makers.length);
  });

  it('keeps a prefix longer than the room kept for one whole', () => {
    const id = prefixedId('a_prefix_longer_than_sixteen');
    expect(id).toMatch(/^a_prefix_longer_than_sixteen_[0-9A-Za-z]{24}$/);
    expect(requestId()).toMatch(/^req_[0-9A-Za-z]{24}$/);
  });
});
