/**
 * The id spliced into a plain answer's text gives the same JSON as a parse and normalizeCompletion,
 * or declines (null) so that the slow path runs: checked on generated answers of every shape.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

describe('spliceCompletionId: the same JSON as normalizeCompletion, or null', () => {
  it('agrees with normalizeCompletion on answers of every shape', async () => {
    const { spliceCompletionId } = await import('../../src/wire/completion-splice.js');
    const { normalizeCompletion } = await import('../../src/wire/chat-response.js');
    const choice = fc.record(
      {
        index: fc.oneof(fc.nat(3), fc.constant('0')),
        message: fc.oneof(
          fc.record(
            {
              role: fc.oneof(fc.constant('assistant'), fc.constant(7)),
              content: fc.oneof(fc.string(), fc.constant(null)),
            },
            { requiredKeys: [] },
          ),
          fc.constant(null),
          fc.constant([]),
        ),
        finish_reason: fc.oneof(fc.constant('stop'), fc.constant(null)),
        tool: fc.record({ id: fc.string() }),
      },
      { requiredKeys: ['message'] },
    );
    const answer = fc.record(
      {
        id: fc.oneof(fc.constant('chatcmpl-1'), fc.constant('a"b'), fc.constant(5)),
        object: fc.oneof(fc.constant('chat.completion'), fc.constant('other')),
        created: fc.oneof(fc.constant(1_763_870_000), fc.constant(1.5), fc.constant('x')),
        model: fc.oneof(fc.constant('gemma4:26b'), fc.constant(''), fc.constant(null)),
        choices: fc.oneof(fc.array(choice, { maxLength: 3 }), fc.constant({})),
        usage: fc.record({ prompt_tokens: fc.nat(), completion_tokens: fc.nat() }),
      },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(
        answer,
        fc.constantFrom('', '"id":"again"', '"\\u0069d":"chatcmpl-1"', '"i\\u0064":5'),
        (a, dupId) => {
          const whole = JSON.stringify(a);
          // A second "id" after the members, plain or escaped (none when the generated answer is `{}`).
          const text = dupId !== '' ? `${whole.slice(0, -1)}${whole === '{}' ? '' : ','}${dupId}}` : whole;
          const parsed = JSON.parse(text) as unknown;
          const spliced = spliceCompletionId(Buffer.from(text), text, parsed, 'chatcmpl-ours');
          if (spliced !== null) {
            expect(JSON.parse(spliced.toString())).toEqual(
              normalizeCompletion(parsed, 'chatcmpl-ours', 'gemma4:26b', 42),
            );
          }
        },
      ),
      { numRuns: 2000 },
    );
    // The common answer takes the fast path.
    const ollama =
      '{"id":"chatcmpl-7","object":"chat.completion","created":1763870000,"model":"gemma4:26b","system_fingerprint":"fp_ollama","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}';
    const accented = ollama.replace('"Hi"', '"Ça va 😀"');
    expect(spliceCompletionId(Buffer.from(accented), accented, JSON.parse(accented), 'chatcmpl-ours')?.toString()).toBe(
      accented.replace('chatcmpl-7', 'chatcmpl-ours'),
    );
    // Bytes that are not UTF-8 take the slow path, whose re-encoding repairs them.
    const broken = Buffer.concat([
      Buffer.from(ollama.slice(0, ollama.indexOf('Hi'))),
      Buffer.from([0xff, 0xc3]),
      Buffer.from(ollama.slice(ollama.indexOf('Hi') + 2)),
    ]);
    const brokenText = broken.toString('utf8');
    expect(spliceCompletionId(broken, brokenText, JSON.parse(brokenText), 'chatcmpl-ours')).toBeNull();
  });
});
