/**
 * The streamed and the plain translation of one answer agree: for any answer and any cut of its
 * text into deltas, the stream's last event states the Responses object chatToResponse makes of
 * the whole answer, and the openai SDK's accumulator builds the same output from the deltas.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { chatToResponse } from '../../src/apis/responses/from-chat.js';
import { WITH_TOOLS } from '../helpers/responses-answer-shapes.js';
import { accumulate, translate } from '../helpers/responses-stream-events.js';
import { completion, contextFor, countingIds, streamOf } from '../helpers/responses-translate.js';

type Json = Record<string, unknown>;

describe('the streamed and the plain translation agree', () => {
  const answer = fc.record({
    reasoning: fc.option(fc.string({ minLength: 1, maxLength: 40 }), { nil: undefined }),
    content: fc.option(fc.string({ minLength: 1, maxLength: 80, unit: 'grapheme' }), { nil: undefined }),
    tool_calls: fc.option(
      fc.array(
        fc.record({
          id: fc.stringMatching(/^call_[a-z0-9]{8}$/),
          type: fc.constant('function'),
          function: fc.record({
            name: fc.constant('get_weather'),
            arguments: fc.json({ maxDepth: 2 }).map((j) => JSON.stringify({ v: JSON.parse(j) as unknown })),
          }),
        }),
        { minLength: 1, maxLength: 3 },
      ),
      { nil: undefined },
    ),
  });

  it('for any answer and any cut of its text into deltas, response.completed equals the plain answer', () => {
    fc.assert(
      fc.property(
        answer,
        fc.constantFrom('stop', 'length', 'tool_calls'),
        fc.array(fc.nat(200), { maxLength: 12 }),
        fc.nat(1000),
        fc.nat(1000),
        (message, finish, cuts, p, c) => {
          const u = { prompt_tokens: p, completion_tokens: c, total_tokens: p + c };
          const plain = chatToResponse(completion(message, finish, u), contextFor(WITH_TOOLS, countingIds()));
          const events = translate(WITH_TOOLS, streamOf(message, finish, u, cuts));
          const last = events.at(-1) as { type: string; data: Json };
          expect(last.type).toBe(finish === 'length' ? 'response.incomplete' : 'response.completed');
          expect(last.data.response).toEqual(plain);
          // The SDK's accumulator, fed the deltas, builds the same output the last event states.
          const snapshot = accumulate(events);
          expect(snapshot.output).toEqual((plain as Json).output);
          // Every delta joined gives the whole text.
          const deltas = events
            .filter((e) => e.type === 'response.output_text.delta')
            .map((e) => e.data.delta as string)
            .join('');
          expect(deltas).toBe(message.content ?? '');
        },
      ),
      { numRuns: 300 },
    );
  });
});
