import { describe, expect, it } from 'vitest';
import { ByteRun, viewOf } from '../../src/wire/byte-run.js';

/** `buf` as a slice at an odd offset of a larger allocation, as the reads of a socket come. */
function slice(text: string, offset: number): Buffer {
  const whole = Buffer.alloc(text.length + offset + 3, 0x2a);
  whole.write(text, offset, 'latin1');
  return whole.subarray(offset, offset + text.length);
}

describe('ByteRun', () => {
  it('finds a run of any length, at any place, in a slice at any offset, as a byte compare does', () => {
    const text = 'event: response.output_text.delta\ndata: {"content_index":0,"delta":"é"}';
    for (let offset = 0; offset < 5; offset++) {
      const buf = slice(text, offset);
      for (let len = 0; len <= 11; len++) {
        for (let from = 0; from + len <= text.length; from += 7) {
          const run = new ByteRun(Buffer.from(text.slice(from, from + len), 'latin1'));
          for (let pos = Math.max(0, from - 2); pos <= Math.min(text.length, from + 2); pos++) {
            const expected = pos + len <= buf.length && buf.subarray(pos, pos + len).equals(run.bytes);
            expect(run.at(viewOf(buf), buf, pos, buf.length)).toBe(expected);
          }
        }
      }
    }
  });

  it('tells a run from one that differs in any one byte, and never reads past the bound', () => {
    const text = '{"item_id":"msg_123456","logprobs":[],"output_index":0}';
    const buf = slice(text, 3);
    const run = new ByteRun(Buffer.from(text, 'latin1'));
    expect(run.at(viewOf(buf), buf, 0, buf.length)).toBe(true);
    expect(run.at(viewOf(buf), buf, 0, buf.length - 1)).toBe(false);
    expect(run.at(viewOf(buf), buf, 1, buf.length)).toBe(false);
    for (let i = 0; i < text.length; i++) {
      const other = Buffer.from(text, 'latin1');
      other[i] = (other[i] as number) ^ 0x01;
      expect(new ByteRun(other).at(viewOf(buf), buf, 0, buf.length)).toBe(false);
    }
  });
});
