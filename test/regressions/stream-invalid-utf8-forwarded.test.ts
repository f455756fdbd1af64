/**
 * Regression (found while reworking the stream fast path): a content frame matching the
 * learned template was forwarded as raw bytes, including bytes that are not UTF-8, which a strict
 * client decoder (Python's json on bytes) rejects for the whole event. The template path now
 * accepts only well-formed UTF-8 inside the content literal; anything else takes the string path,
 * whose decoding replaces bad bytes with U+FFFD, as it did for the first frame of every stream.
 */
import { isUtf8 } from 'node:buffer';
import { expect, it } from 'vitest';
import { OutputBatch } from '../../src/wire/output-batch.js';
import { SseRelay } from '../../src/wire/sse-relay.js';

it('a template frame whose content is not UTF-8 reaches the client repaired', () => {
  const head = 'data: {"id":"up","choices":[{"index":0,"delta":{"content":"';
  const tail = '"}}]}\n\n';
  const relay = new SseRelay('chatcmpl-x', false);
  const out = new OutputBatch();
  relay.pushInto(Buffer.from(`${head}ok${tail}`), out);
  relay.pushInto(
    Buffer.concat([Buffer.from(`${head}a`), Buffer.from([0xed, 0xa0, 0x80, 0xc3]), Buffer.from(`b${tail}`)]),
    out,
  );
  const sent = out.take();
  expect(isUtf8(sent)).toBe(true);
  expect(sent.toString()).toBe(
    'data: {"id":"chatcmpl-x","choices":[{"index":0,"delta":{"content":"ok"}}]}\n\n' +
      'data: {"id":"chatcmpl-x","choices":[{"index":0,"delta":{"content":"a\uFFFD\uFFFD\uFFFD\uFFFDb"}}]}\n\n',
  );
});
