/**
 * Regression: the 60 s header limit and the request limit (OB_PROXY_REQUEST_TIMEOUT)
 * are enforced by Node only when its connections check runs, and that ran every 30 s
 * (requestTimeout / 4, capped at 30 s): headers trickled a byte at a time held their socket for
 * up to 90 s, a trickled body for up to 150 s. Now the check runs every second.
 *
 * Two halves, so that no test waits a real minute: the data plane is built in process and its
 * server holds the documented limits and the one-second check at the default settings and at
 * OB_PROXY_REQUEST_TIMEOUT=60; a daemon on real sockets with a 5 s request limit (so 5 s for
 * headers too: the header limit is 60 s or the request limit if shorter) cuts trickled headers and
 * a trickled body at that limit. The daemon starts just before its slow clients connect, so Node's default 30 s
 * check, or any tick longer than the slack, would cut them late and fail here.
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Simulator } from '../../simulator/simulator.js';
import { obError } from '../../src/errors.js';
import { hello } from '../helpers/chat.js';
import { buildInproc } from '../helpers/inproc.js';
import { inprocCli } from '../helpers/inproc-cli.js';
import { type Harness, MODEL, startHarness, startSim } from '../reliability/harness.js';

const LIMIT_S = 5;
const SLACK_MS = 4_000;
let sim: Simulator;
let simUrl: string;
let d: Harness | undefined;

beforeAll(async () => {
  ({ sim, url: simUrl } = await startSim());
});

// Both at once: a daemon slow to drain must not leave the simulator running past the hook's time-out.
afterAll(async () => {
  await Promise.all([d?.stop(), sim?.close()]);
});

it.each([
  [{}, { requestTimeout: 120_000, headersTimeout: 60_000, connectionsCheckingInterval: 1_000 }],
  [
    { OB_PROXY_REQUEST_TIMEOUT: '60' },
    { requestTimeout: 60_000, headersTimeout: 60_000, connectionsCheckingInterval: 1_000 },
  ],
  [
    { OB_PROXY_REQUEST_TIMEOUT: '30' },
    { requestTimeout: 30_000, headersTimeout: 30_000, connectionsCheckingInterval: 1_000 },
  ],
])('with %j the data plane server holds the limits %j', async (env, limits) => {
  const d = await buildInproc({}, env);
  try {
    // Node keeps the option on the server as it was given; @types/node does not declare it.
    const server = d.daemon.dataPlane.server as typeof d.daemon.dataPlane.server & {
      connectionsCheckingInterval: number;
    };
    const { requestTimeout, headersTimeout, connectionsCheckingInterval } = server;
    expect({ requestTimeout, headersTimeout, connectionsCheckingInterval }).toEqual(limits);
  } finally {
    await d.close();
  }
});

interface Cut {
  /** From connect to the server closing the connection. */
  ms: number;
  text: string;
}

/** Writes `head`, then one more byte of `drip` every second, until the server closes. */
async function trickle(baseUrl: string, head: string, drip: string): Promise<Cut> {
  const url = new URL(baseUrl);
  const socket = connect(Number(url.port), url.hostname);
  let text = '';
  socket.setEncoding('utf8').on('data', (s: string) => {
    text += s;
  });
  socket.on('error', () => {});
  await new Promise((r) => socket.once('connect', r));
  const started = Date.now();
  socket.write(head);
  let i = 0;
  const timer = setInterval(() => {
    if (!socket.destroyed) socket.write(drip[i++ % drip.length]!);
  }, 1_000);
  await new Promise((r) => socket.once('close', r));
  clearInterval(timer);
  return { ms: Date.now() - started, text };
}

function expect408(cut: Cut, limitMs: number): void {
  expect(cut.text.startsWith('HTTP/1.1 408 ')).toBe(true);
  expect(JSON.parse(cut.text.slice(cut.text.indexOf('\r\n\r\n') + 4))).toEqual(obError('request_timeout').toBody());
  expect.soft(cut.ms).toBeGreaterThanOrEqual(limitMs - 1_000);
  expect.soft(cut.ms).toBeLessThan(limitMs + SLACK_MS);
}

it('headers trickled a byte a second are cut at the header limit, and a body at the request limit', async () => {
  d = await startHarness({}, { env: { OB_PROXY_REQUEST_TIMEOUT: String(LIMIT_S) } });
  const cli = inprocCli(d.daemon.management);
  await cli.json('instances', 'add', 'slow', '--model', MODEL, '--endpoint', simUrl);
  const key = (await cli.json<{ defaultKey: { secret: string } }>('instances', 'ready', 'slow')).defaultKey.secret;
  const payload = JSON.stringify(hello(MODEL));
  const [h, b] = await Promise.all([
    trickle(d.baseUrl, 'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Slow: ', 'abcdefgh'),
    trickle(
      d.baseUrl,
      `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${payload.length + 1_000}\r\n\r\n${payload}`,
      ' ',
    ),
  ]);
  expect408(h, LIMIT_S * 1_000);
  expect408(b, LIMIT_S * 1_000);
});
