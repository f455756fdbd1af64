/**
 * Regression (issue 10): the 60 s header limit and the request limit (OB_PROXY_REQUEST_TIMEOUT)
 * are enforced by Node only when its connections check runs, and that ran every 30 s
 * (requestTimeout / 4, capped at 30 s): headers trickled a byte at a time held their socket for
 * up to 90 s, a trickled body for up to 150 s. Now the check runs every second.
 *
 * A real minute, on purpose: the defect is the default limits. Both daemons start just before
 * their slow client connects, so the old 30 s (or 15 s) ticks would have cut it late by most of a
 * tick, far past the slack allowed here.
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { obError } from '../../src/errors.js';
import { hello } from '../helpers/chat.js';
import {
  type ServeProcess,
  type SimProcess,
  cliJson,
  startServe,
  startSimulate,
  tmpHome,
} from '../helpers/processes.js';

const MODEL = 'gemma4:26b';
const SLACK_MS = 4_000;
let sim: SimProcess;
const serves: ServeProcess[] = [];

beforeAll(async () => {
  sim = await startSimulate([MODEL]);
});

afterAll(async () => {
  await Promise.all(serves.map((s) => s.stop()));
  await sim?.stop();
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

it('headers trickled a byte a second are cut at the 60 s header limit, and a body at the request limit', async () => {
  const headers = async (): Promise<Cut> => {
    const home = await tmpHome();
    const serve = await startServe(home);
    serves.push(serve);
    return trickle(serve.baseUrl, 'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Slow: ', 'abcdefgh');
  };
  const body = async (): Promise<Cut> => {
    const home = await tmpHome();
    // OB_PROXY_REQUEST_TIMEOUT=60: the request limit is 60 s and the old check ran every 15 s.
    const serve = await startServe(home, [], { OB_PROXY_REQUEST_TIMEOUT: '60' });
    serves.push(serve);
    await cliJson(['instances', 'add', 'slow', '--model', MODEL, '--endpoint', sim.url], home);
    const key = (await cliJson<{ defaultKey: { secret: string } }>(['instances', 'ready', 'slow'], home)).defaultKey
      .secret;
    const payload = JSON.stringify(hello(MODEL));
    return trickle(
      serve.baseUrl,
      `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${payload.length + 1_000}\r\n\r\n${payload}`,
      ' ',
    );
  };
  const [h, b] = await Promise.all([headers(), body()]);
  expect408(h, 60_000);
  expect408(b, 60_000);
}, 120_000);
