/**
 * The upstream client kept one undici Pool for every model-server origin ever asked, for the
 * daemon's life: rentals come and go, each at its own address, so the map only grew. Past
 * IDLE_POOL_SWEEP_AT origins, a new one now closes the pools that hold no connection and no
 * request; a pool in use is kept, and an origin asked again gets a new pool.
 */
import { once } from 'node:events';
import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Dispatcher } from 'undici';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { IDLE_POOL_SWEEP_AT, UpstreamClient } from '../../src/upstream/upstream-client.js';
import { eventually } from '../helpers/processes.js';

const servers: Server[] = [];
const urls: string[] = [];
/** Responses the slow server holds open (a request in flight while the sweep runs). */
const held: (() => void)[] = [];
/** Connections open on the servers' side: a socket the client has not closed yet. */
let open = 0;

beforeAll(async () => {
  for (let i = 0; i <= IDLE_POOL_SWEEP_AT + 2; i++) {
    const slow = i === 0;
    const s = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        const answer = () => {
          // Connection: close, so a pool's socket is gone once its answer is read.
          res.writeHead(200, { 'content-type': 'application/json', connection: 'close' });
          res.end('{}');
        };
        if (slow) held.push(answer);
        else answer();
      });
    });
    s.on('connection', (socket) => {
      open++;
      socket.on('close', () => open--);
    });
    s.listen(0, '127.0.0.1');
    await once(s, 'listening');
    servers.push(s);
    urls.push(`http://127.0.0.1:${(s.address() as AddressInfo).port}`);
  }
});
afterAll(async () => {
  for (const s of servers) {
    s.closeAllConnections();
    s.close();
  }
});

/** Sends one request; resolves when its answer has ended (or failed). */
function ask(client: UpstreamClient, endpoint: string): { started: Promise<void>; done: Promise<number> } {
  let started!: () => void;
  const startedP = new Promise<void>((r) => (started = r));
  const done = new Promise<number>((resolve, reject) => {
    let status = 0;
    const handler: Dispatcher.DispatchHandler = {
      onRequestStart: () => started(),
      onResponseStart: (_c, code) => {
        status = code;
      },
      onResponseData: () => {},
      onResponseEnd: () => resolve(status),
      onResponseError: (_c, err) => reject(err),
    };
    client.dispatch({ endpoint, body: '{}', stream: false, requestId: 'r' }, handler);
  });
  return { started: startedP, done };
}

async function settle(client: UpstreamClient, endpoint: string): Promise<void> {
  expect(await ask(client, endpoint).done).toBe(200);
}

it('idle pools of origins no longer asked are closed; a pool with a request in flight is kept', async () => {
  const client = new UpstreamClient({ connectTimeoutMs: 1_000 });
  try {
    const slow = ask(client, urls[0] as string);
    await slow.started;
    for (let i = 1; i < IDLE_POOL_SWEEP_AT; i++) await settle(client, urls[i] as string);
    expect(client.poolCount).toBe(IDLE_POOL_SWEEP_AT);
    // Once their sockets have closed, the next new origin sweeps every idle pool but the slow one.
    await eventually(() => open === 1, 'the answered connections to close');
    await new Promise<void>((r) => setImmediate(r));
    await settle(client, urls[IDLE_POOL_SWEEP_AT] as string);
    expect(client.poolCount).toBe(2);
    // The request held through the sweep is answered whole.
    (held.shift() as () => void)();
    expect(await slow.done).toBe(200);
    // An origin whose pool was closed is asked again: a new pool serves it.
    await settle(client, urls[1] as string);
    expect(client.poolCount).toBe(3);
  } finally {
    await client.close();
  }
});
