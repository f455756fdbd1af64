import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { spliceResponseId } from '../../src/apis/responses/splice.js';

/**
 * The plain Responses answer's fast path against re-encoding: whenever the id is spliced into
 * the server's bytes, a client parsing them reads exactly the object re-encoding would have sent
 * (our id, every other value and the key order as the server's), and hostile layouts (a
 * repeated top-level id, an id nested where a response has none, a value "id", an escaped key,
 * bytes that are not UTF-8) are left to re-encoding.
 */

const OURS = 'resp_ABCDEFGHIJKLMNOPQRSTUVWX';

function item(i: number, text: string): Record<string, unknown> {
  return {
    id: `msg_${i}`,
    type: 'message',
    status: 'completed',
    role: 'assistant',
    content: [{ type: 'output_text', text, annotations: [], logprobs: [] }],
  };
}

const answerArb = fc
  .tuple(
    fc.array(fc.string({ unit: 'grapheme', maxLength: 10 }), { maxLength: 3 }),
    fc.constantFrom('resp_123', 'resp_\u00e9', 'r'),
    fc.nat({ max: 9 }),
  )
  .map(([texts, serverId, hostile]) => {
    const body = {
      id: serverId,
      object: 'response',
      status: 'completed',
      output: texts.map((t, i) => item(i, t)),
      usage: { input_tokens: 2, output_tokens: 3 },
    };
    let text = JSON.stringify(body);
    let bytes: Buffer | null = null;
    switch (hostile) {
      case 1:
        text = `${text.slice(0, -1)},"id":"${serverId}"}`;
        break;
      case 2:
        text = text.replace('"status":"completed"', '"status":"completed","meta":{"id":"x"}');
        break;
      case 3:
        text = text.replace('"status":"completed"', '"status":"id"');
        break;
      case 4:
        text = `${text.slice(0, -1)},"\\u0069d":"${serverId}"}`;
        break;
      case 5:
        text = text.replace('"object":', '"object" :');
        break;
      case 6:
        bytes = Buffer.concat([Buffer.from(text.slice(0, -1)), Buffer.from(',"x":"\xff"}', 'latin1')]);
        break;
      case 7:
        text = text.replace('{"id":', '{ "id":');
        break;
      default:
    }
    const raw = bytes ?? Buffer.from(`${text}\n`);
    return raw;
  });

describe('spliceResponseId', () => {
  it('splices only where the client reads what re-encoding would send', () => {
    let spliced = 0;
    fc.assert(
      fc.property(answerArb, (raw) => {
        const text = raw.toString('utf8');
        const parsed = JSON.parse(text) as Record<string, unknown>;
        const out = spliceResponseId(raw, text, parsed, OURS);
        if (out === null) return;
        spliced++;
        const reencoded = `${JSON.stringify({ ...parsed, id: OURS })}\n`;
        expect(JSON.stringify(JSON.parse(out.toString('utf8')))).toBe(reencoded.trimEnd());
        expect(out.toString('utf8').endsWith('}\n')).toBe(true);
        expect(
          out
            .subarray(out.length - raw.length + 7 + String(parsed.id).length)
            .equals(raw.subarray(7 + String(parsed.id).length)),
        ).toBe(true);
      }),
      { numRuns: 500 },
    );
    expect(spliced).toBeGreaterThan(50);
  });

  it('leaves a repeated top-level id, an escaped one, a nested id, a value "id" and bad UTF-8 to re-encoding', () => {
    const base = JSON.stringify({ id: 'resp_1', object: 'response', output: [item(0, 'hi')] });
    for (const text of [
      `${base.slice(0, -1)},"id":"resp_1"}`,
      `${base.slice(0, -1)},"\\u0069d":"resp_1"}`,
      base.replace('"object":"response"', '"object":"response","x":{"id":"y"}'),
      base.replace('"object":"response"', '"object":"response","x":"id"'),
    ])
      expect(spliceResponseId(Buffer.from(text), text, JSON.parse(text) as Record<string, unknown>, OURS)).toBeNull();
    const bad = Buffer.concat([Buffer.from(base.slice(0, -1)), Buffer.from(',"x":"\xff"}', 'latin1')]);
    const badText = bad.toString('utf8');
    expect(spliceResponseId(bad, badText, JSON.parse(badText) as Record<string, unknown>, OURS)).toBeNull();
    expect(
      spliceResponseId(Buffer.from(base), base, JSON.parse(base) as Record<string, unknown>, OURS)?.toString(),
    ).toBe(base.replace('resp_1', OURS));
  });
});
