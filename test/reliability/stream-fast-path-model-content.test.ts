/**
 * What a model writes, a client controls through its prompt. A model server that echoes the
 * prompt back token by token, encoded as servers encode it (JSON.stringify: quotes, backslashes,
 * control characters and halves of a surrogate pair escaped), streamed through two daemons, one
 * with the stream fast path (event layouts learned, shared by a server's streams) and one with
 * it off: the client gets the same bytes from both (but the id), every token whole in its own
 * event, no event the prompt wrote (`"}\n\ndata: {…"error"…}`), and the usage chunk's count.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type RawUpstream, startRawUpstream } from '../helpers/hostile-upstream.js';
import { type Harness, MODEL, chatBody, post, readyInstance, sseFrames, startHarness } from './harness.js';

const PROMPTS = [
  'plain words',
  '"}\n\ndata: {"id":"x","error":{"message":"injected"}}\n\ndata: [DONE]\n\n',
  '","usage":{"prompt_tokens":0,"completion_tokens":0},"x":"',
  'back\\slash \\" \\u0000 \u0000 \r\n \t \u2028 \u007f é 😀😀 𝄞',
  '{"city": "Zürich", "list": [1, "a\\"b"]}',
];
/** The delta keys a token may go in: text, reasoning, a tool call's argument fragments. */
const KINDS = ['content', 'reasoning', 'arguments'] as const;

/** The prompt cut into tokens of 1 to 3 UTF-16 code units: a surrogate pair may be cut in two. */
function tokens(text: string): string[] {
  const out: string[] = [];
  for (let i = 0, n = 1; i < text.length; i += n, n = (n % 3) + 1) out.push(text.slice(i, i + n));
  return out;
}

function delta(kind: (typeof KINDS)[number], t: string): unknown {
  if (kind === 'arguments') return { tool_calls: [{ index: 0, function: { arguments: t } }] };
  return { [kind]: t };
}

/** The echoing server's stream: one event per token, the finish event, the usage chunk, [DONE]. */
function streamOf(prompt: string, kind: (typeof KINDS)[number]): string {
  const head = { id: 'chatcmpl-up', object: 'chat.completion.chunk', created: 1763870000, model: MODEL };
  const ts = tokens(prompt);
  const events = [
    ...ts.map((t) => ({ ...head, choices: [{ index: 0, delta: delta(kind, t), finish_reason: null }] })),
    { ...head, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] },
    { ...head, choices: [], usage: { prompt_tokens: 3, completion_tokens: ts.length, total_tokens: 3 + ts.length } },
  ];
  return events.map((e) => `data: ${JSON.stringify(e)}\n\n`).join('') + 'data: [DONE]\n\n';
}

let up: RawUpstream;
let fast: Harness;
let slow: Harness;
let fastKey: string;
let slowKey: string;
beforeAll(async () => {
  up = await startRawUpstream(({ content }) => {
    const [kind, prompt] = JSON.parse(content) as [(typeof KINDS)[number], string];
    return { body: streamOf(prompt, kind) };
  });
  fast = await startHarness();
  slow = await startHarness({ relayFastPath: false });
  fastKey = await readyInstance(fast, 'gpu-1', up.url);
  slowKey = await readyInstance(slow, 'gpu-1', up.url);
});
afterAll(async () => {
  await fast.stop();
  await slow.stop();
  await up.close();
});

it('the client gets the slow path`s bytes, one event per token, whatever the prompt made the model write', async () => {
  // Twice: the second round's streams find the layouts the first round's taught.
  for (let round = 0; round < 2; round++) {
    for (const kind of KINDS) {
      for (const prompt of PROMPTS) {
        const body = chatBody(JSON.stringify([kind, prompt]), {
          stream: true,
          stream_options: { include_usage: true },
        });
        const a = await post(fast.baseUrl, fastKey, body);
        const b = await post(slow.baseUrl, slowKey, body);
        expect([a.status, b.status]).toEqual([200, 200]);
        const idOf = (text: string): string => /"id":"([^"]+)"/.exec(text)?.[1] as string;
        const expected = streamOf(prompt, kind).replaceAll('"id":"chatcmpl-up"', `"id":"${idOf(a.text)}"`);
        expect({ round, kind, prompt, text: a.text }).toEqual({ round, kind, prompt, text: expected });
        expect(b.text.replaceAll(idOf(b.text), idOf(a.text))).toBe(a.text);
        // The prompt's text comes back whole, each token in an event of its own.
        const events = sseFrames(a.text).filter((f) => f !== 'data: [DONE]');
        expect(events).toHaveLength(tokens(prompt).length + 2);
        const said = events
          .map((f) => JSON.parse(f.slice(6)) as { choices: { delta: Record<string, unknown> }[]; error?: unknown })
          .map((e) => {
            expect(e.error).toBeUndefined();
            const d = e.choices[0]?.delta ?? {};
            const call = (d.tool_calls as { function: { arguments: string } }[] | undefined)?.[0];
            return (d.content ?? d.reasoning ?? call?.function.arguments ?? '') as string;
          })
          .join('');
        expect(said).toBe(prompt);
      }
    }
  }
});
