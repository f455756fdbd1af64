/**
 * Regression: a relay learnt of its client's departure only from its
 * response's 'close' event, and that event comes once. A response that had closed before its
 * relay was made (its client gone between the body's end and the handler) was never told: the
 * request went to the model server, the instance's admission slot and the relay were held until
 * the answer or the response deadline, and the receipt counted a served request, not a
 * disconnect. A relay made on a closed response now takes its client as gone at once: nothing is
 * sent upstream, and the exchange is counted as a disconnect.
 *
 * The window is a turn of the event loop wide on the daemon's own paths, so it is opened here on
 * purpose: a real HTTP server makes the relay only once its response has closed.
 */
import { once } from 'node:events';
import { type IncomingMessage, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { Deadlines } from '../../daemon/data-plane/deadlines.js';
import { Relay, type RelayContext } from '../../daemon/data-plane/upstream-relay.js';
import { PlainAnswer } from '../../daemon/data-plane/plain-relay.js';
import { StreamAnswer } from '../../daemon/data-plane/stream-relay.js';
import type { RequestOutcome } from '../../src/services/usage.js';
import { SseRelay } from '../../src/wire/sse-relay.js';
import { DEFAULT_ANSWER_LIMITS } from '../../src/upstream/answer-limits.js';
import { UpstreamClient } from '../../src/upstream/upstream-client.js';
import type { Simulator } from '../../simulator/simulator.js';
import { MODEL, chatRequests, startSim } from '../helpers/inproc.js';

let sim: Simulator;
let simUrl: string;
const upstream = new UpstreamClient({ connectTimeoutMs: 5_000 });
const deadlines = new Deadlines();

beforeAll(async () => {
  ({ sim, url: simUrl } = await startSim());
});
afterAll(async () => {
  await upstream.destroy();
  await sim.close();
});

interface Counted {
  prompt: number | null;
  completion: number | null;
  outcome: RequestOutcome;
}

/** A request whose client leaves as soon as it is sent; the relay is made once its response has closed. */
async function relayAfterClientLeft(stream: boolean): Promise<{ counted: Counted[]; warnings: string[] }> {
  const counted: Counted[] = [];
  const warnings: string[] = [];
  let settled!: Promise<void>;
  const server = createServer((_req: IncomingMessage, res: ServerResponse) => {
    settled = (async () => {
      await once(res, 'close');
      const c: RelayContext = {
        res,
        id: 'chatcmpl-test',
        model: MODEL,
        reqId: 'req-1',
        clock: { now: () => 0 },
        exchange: {
          ended: (prompt, completion, _counted, _reasoning, outcome) => {
            counted.push({ prompt, completion, outcome });
          },
        },
        limits: DEFAULT_ANSWER_LIMITS,
        deadlines,
        observer: null,
        log: { warn: (_o, msg) => warnings.push(msg) },
        instance: 'gpu-1',
        key: 'k1',
        routeMissing: null,
        resend: null,
      };
      const relay = new Relay(c, stream ? new StreamAnswer(new SseRelay(c.id, false, null)) : new PlainAnswer());
      upstream.dispatch(
        {
          endpoint: simUrl,
          body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], stream }),
          stream,
          requestId: 'req-1',
        },
        relay,
      );
      await relay.done;
    })();
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  const client = new AbortController();
  const sent = fetch(`http://127.0.0.1:${port}/`, { method: 'POST', body: '{}', signal: client.signal }).catch(
    () => null,
  );
  // The server has the request once its handler ran; then the client leaves.
  while (settled === undefined) await new Promise((r) => setTimeout(r, 5));
  client.abort();
  await sent;
  await settled;
  server.close();
  return { counted, warnings };
}

it.each([false, true])(
  'stream %s: nothing reaches the model server, and the exchange is one disconnect',
  async (stream) => {
    const before = chatRequests(sim).length;
    const { counted, warnings } = await relayAfterClientLeft(stream);
    expect({ counted, warnings, upstream: chatRequests(sim).length - before }).toEqual({
      // The model server never had the prompt: nothing to charge for it, and nothing it answered.
      counted: [{ prompt: 0, completion: 0, outcome: 'disconnect' }],
      warnings: [],
      upstream: 0,
    });
  },
);
