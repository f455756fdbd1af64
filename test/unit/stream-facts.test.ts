/**
 * daemon/tracing/stream-facts.ts: a stream's model and last finish reason, read from its first and
 * last bytes, however the reads cut them, and never from a token's text or an odd value.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { StreamFacts } from '../../daemon/tracing/stream-facts.js';

const event = (o: unknown): string => `data: ${JSON.stringify(o)}\n\n`;
const STREAM =
  event({ id: 'c1', model: 'gemma4:26b', choices: [{ index: 0, delta: { content: 'Hi' }, finish_reason: null }] }) +
  event({
    id: 'c1',
    model: 'gemma4:26b',
    choices: [{ index: 0, delta: { content: '"finish_reason":"fake", "model":"fake"' }, finish_reason: null }],
  }) +
  event({ id: 'c1', model: 'gemma4:26b', choices: [{ index: 0, delta: {}, finish_reason: 'length' }] }) +
  event({ id: 'c1', model: 'gemma4:26b', choices: [], usage: { prompt_tokens: 3, completion_tokens: 2 } }) +
  'data: [DONE]\n\n';

function read(parts: Buffer[]): { model: string | null; finishReason: string | null } {
  const f = new StreamFacts();
  for (const p of parts) f.push(p);
  return { model: f.model(), finishReason: f.finishReason() };
}

describe('StreamFacts', () => {
  it('the first model and the last finish reason, not what a token says', () => {
    expect(read([Buffer.from(STREAM)])).toEqual({ model: 'gemma4:26b', finishReason: 'length' });
  });

  it('whatever the reads, the same facts', () => {
    const bytes = Buffer.from(STREAM);
    fc.assert(
      fc.property(fc.uniqueArray(fc.integer({ min: 1, max: bytes.length - 1 }), { maxLength: 40 }), (cuts) => {
        const at = [0, ...cuts.sort((a, b) => a - b), bytes.length];
        const parts = at.slice(1).map((end, i) => bytes.subarray(at[i], end));
        expect(read(parts)).toEqual({ model: 'gemma4:26b', finishReason: 'length' });
      }),
    );
  });

  it('spaces around the colon (Python json.dumps) are read', () => {
    expect(read([Buffer.from('data: {"model": "m-1", "choices": [{"finish_reason": "stop"}]}\n\n')])).toEqual({
      model: 'm-1',
      finishReason: 'stop',
    });
  });

  it('a long stream: the model from its start, the finish reason from its end, few reads kept', () => {
    const token = event({ id: 'c1', model: 'gemma4:26b', choices: [{ delta: { content: 'x' }, finish_reason: null }] });
    const reads = [Buffer.from(token.replace('gemma4:26b', 'first-model')), ...Array(500).fill(Buffer.from(token))];
    const f = new StreamFacts();
    for (const r of reads) f.push(r as Buffer);
    f.push(Buffer.from(STREAM));
    expect({ model: f.model(), finishReason: f.finishReason() }).toEqual({
      model: 'first-model',
      finishReason: 'length',
    });
    // The last 4 KiB, give or take a read: not the 500 reads before them.
    const kept = (f as unknown as { tail: Buffer[] }).tail.reduce((n, b) => n + b.length, 0);
    expect(kept).toBeLessThan(4096 + token.length);
  });

  it('a value that is long, escaped, empty or not plain text is not kept', () => {
    for (const v of ['x'.repeat(200), 'a\\"b', '', 'é', 'a\\nb']) {
      expect(read([Buffer.from(`{"model":"${v}","finish_reason":"${v}"}`)]), v).toEqual({
        model: null,
        finishReason: null,
      });
    }
    expect(read([Buffer.from('{"model":7,"finish_reason":null}')])).toEqual({ model: null, finishReason: null });
  });
});
