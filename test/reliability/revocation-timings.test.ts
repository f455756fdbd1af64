/**
 * Property: whatever the timing of a revocation against requests whose bodies are
 * held back, streams and plain requests in flight, once the management API has acknowledged it,
 * no request with that key gets an answer: each is refused, or ends with the error (docs/contract.md §3),
 * streams carry no token after the acknowledgement but one already on the wire, and the model
 * server sees each request it got closed before it finished. Real serve and simulate processes;
 * each request would run 6 s if nothing ended it, and every action comes within 1.5 s.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { hello } from '../helpers/chat.js';
import {
  type ServeProcess,
  type SimProcess,
  eventually,
  startServe,
  startSimulate,
  tmpHome,
} from '../helpers/processes.js';
import {
  Management,
  type OpenStream,
  type RawResponse,
  holdBody,
  openChat,
  sseData,
  tokensIn,
} from '../helpers/raw-http.js';

const MODEL = 'gemma4:26b';
let sim: SimProcess;
let serve: ServeProcess;
let api: Management;

beforeAll(async () => {
  const home = await tmpHome();
  sim = await startSimulate([MODEL]);
  serve = await startServe(home);
  api = new Management(home);
});

afterAll(async () => {
  await api?.close();
  await serve?.stop();
  await sim?.stop();
});

type Action = 'revoke' | 'stop' | 'terminate' | 'remove';
interface Req {
  stream: boolean;
  holdMs: number | null;
}

const requestArb = fc.record({
  stream: fc.boolean(),
  holdMs: fc.option(fc.integer({ min: 0, max: 2_000 }), { nil: null }),
});
const scenarioArb = fc.record({
  action: fc.constantFrom<Action>('revoke', 'stop', 'terminate', 'remove'),
  actAfterMs: fc.integer({ min: 0, max: 1_500 }),
  requests: fc.array(requestArb, { minLength: 1, maxLength: 4 }),
});

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

interface Outcome {
  status: number;
  body: string;
  /** Set for requests sent at once: pieces with their arrival time. */
  live?: OpenStream;
}

function isAllowedError(json: unknown, codes: string[]): boolean {
  const e = (json as { error?: { code?: unknown; param?: unknown; type?: unknown; message?: unknown } } | null)?.error;
  return (
    e !== undefined &&
    codes.includes(String(e.code)) &&
    e.param === null &&
    typeof e.type === 'string' &&
    typeof e.message === 'string'
  );
}

let run = 0;

it('after an acknowledged revocation, no request with the key is answered, and every one in flight ends with the error', async () => {
  await fc.assert(
    fc.asyncProperty(scenarioArb, async ({ action, actAfterMs, requests }) => {
      const id = `r${++run}`;
      await api.call('POST', '/v1/instances', { id, model: MODEL, endpoint: sim.url });
      const ready = await api.call<{ defaultKey: { id: string; secret: string } }>(
        'POST',
        `/v1/instances/${id}/ready`,
        {},
      );
      const key = ready.defaultKey;
      const body = (i: number, r: Req): string =>
        JSON.stringify(
          hello(MODEL, {
            stream: r.stream,
            messages: [{ role: 'user', content: `tag-${id}-${i}- [[sim chunks=60 tokensPerSecond=10]]` }],
          }),
        );

      const started = Date.now();
      let ackedAt = Infinity;
      const outcomes = requests.map(async (r, i): Promise<Outcome> => {
        if (r.holdMs === null) {
          const s = await openChat(serve.baseUrl, key.secret, JSON.parse(body(i, r)) as unknown);
          await s.ended;
          return { status: s.status, body: s.text(), live: s };
        }
        const held = await holdBody(serve.baseUrl, key.secret, body(i, r));
        await sleep(Math.max(0, started + r.holdMs - Date.now()));
        const res: RawResponse = await held.send();
        return { status: res.status, body: res.body };
      });
      await sleep(actAfterMs);
      if (action === 'revoke') await api.call('POST', `/v1/keys/${key.id}/revoke`);
      else if (action === 'remove') await api.call('DELETE', `/v1/instances/${id}`);
      else await api.call('POST', `/v1/instances/${id}/${action}`);
      ackedAt = Date.now();

      // A new request after the acknowledgement is refused.
      const after = await openChat(serve.baseUrl, key.secret, hello(MODEL));
      await after.ended;
      expect(after.status).toBe(action === 'remove' ? 404 : 401);

      // Refused before it was sent (404 for a removed deployment), or ended while in flight.
      const codes = action === 'remove' ? ['deployment_not_found', 'revoked_api_key'] : ['revoked_api_key'];
      for (const o of await Promise.all(outcomes)) {
        if (o.status === 200) {
          const data = sseData(o.body);
          expect(data).not.toContain('[DONE]');
          expect(isAllowedError(JSON.parse(data.at(-1) ?? 'null'), codes)).toBe(true);
          if (o.live !== undefined)
            expect(
              tokensIn(
                o.live.pieces
                  .filter((p) => p.at > ackedAt)
                  .map((p) => p.text)
                  .join(''),
              ),
            ).toBeLessThanOrEqual(1);
        } else {
          expect([401, 404]).toContain(o.status);
          expect(isAllowedError(JSON.parse(o.body), codes)).toBe(true);
        }
      }
      // Whatever reached the model server was closed before it finished.
      await eventually(async () => {
        const mine = (await sim.requests()).filter((r) => JSON.stringify(r.body).includes(`tag-${id}-`));
        return mine.every((r) => r.aborted && !r.completed);
      }, 'upstream requests aborted');
    }),
    { numRuns: 12, endOnFailure: true },
  );
}, 180_000);
