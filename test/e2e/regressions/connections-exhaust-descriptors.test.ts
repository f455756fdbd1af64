/**
 * Regression: the public listener had no cap on connections. One address could open connections
 * that sent nothing, each held until the header limit (60 s) or the keep-alive limit (65 s),
 * until the process ran out of file descriptors (`ulimit -n`, or a unit's LimitNOFILE): then new
 * clients could not connect, and a request on a connection opened before the flood could not
 * open its socket to the model server (EMFILE, a 502 for a valid key).
 *
 * Now the listener holds at most --max-connections at once (by default half of what the
 * descriptor limit leaves after 128 for the daemon's own files and sockets, so that every client
 * connection has a descriptor for its upstream socket too), and at most
 * --max-connections-per-address from one address (IPv6: one /64; by default half the cap).
 * Connections past either cap are closed as they arrive, and a line is logged once per address
 * per minute, never one per refused connection.
 *
 * The daemon runs under a descriptor limit of 400 (so: 136 connections, 68 per address) and the
 * flood comes from other loopback addresses than the valid client's (127.0.0.2 and up; Linux
 * routes all of 127/8 to lo).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { type Socket, connect } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { hello } from '../../helpers/chat.js';
import { openConnection, type RawConnection } from '../../helpers/raw-connection.js';
import { BIN, NODE, type SimProcess, cliJson, eventually, startSimulate, tmpHome } from '../../helpers/processes.js';

const MODEL = 'gemma4:26b';
const NOFILE = 400;
const CAP = (NOFILE - 128) / 2;
const PER_ADDRESS = CAP / 2;

let sim: SimProcess;
let daemon: ChildProcess | undefined;
const lines: string[] = [];
const flood: Socket[] = [];

beforeAll(async () => {
  sim = await startSimulate([MODEL]);
});

afterAll(async () => {
  for (const s of flood) s.destroy();
  if (daemon !== undefined && daemon.exitCode === null) {
    const exited = new Promise((r) => daemon!.once('exit', r));
    daemon.kill('SIGTERM');
    await exited;
  }
  await sim?.stop();
});

/** `ob-proxy serve` under a low descriptor limit, so that exhausting it is cheap. */
async function serveUnderLimit(home: string): Promise<string> {
  const p = spawn('prlimit', [`--nofile=${NOFILE}:${NOFILE}`, NODE, BIN, 'serve', '--home', home, '--port', '0'], {
    env: { ...process.env, NO_COLOR: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  daemon = p;
  let buf = '';
  p.stdout!.setEncoding('utf8').on('data', (s: string) => {
    buf += s;
    let at: number;
    while ((at = buf.indexOf('\n')) !== -1) {
      lines.push(buf.slice(0, at));
      buf = buf.slice(at + 1);
    }
  });
  p.stderr!.resume();
  const line = await eventually(() => lines.find((l) => l.includes('"ob-proxy serving"')), 'ob-proxy serve', 15_000);
  return (JSON.parse(line) as { baseUrl: string }).baseUrl;
}

/** `count` connections from `from` that never send a byte; resolves with how many the daemon closed. */
function openIdle(baseUrl: string, from: string, count: number): { closed: () => number } {
  const url = new URL(baseUrl);
  let closed = 0;
  for (let i = 0; i < count; i++) {
    const s = connect({ port: Number(url.port), host: url.hostname, localAddress: from });
    s.on('error', () => {});
    s.on('close', () => closed++);
    flood.push(s);
  }
  return { closed: () => closed };
}

function chatRequest(key: string): string {
  const body = JSON.stringify(hello(MODEL));
  return (
    `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n` +
    `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
  );
}

async function expectServed(conn: RawConnection, key: string): Promise<void> {
  conn.write(chatRequest(key));
  const answer = await conn.answer(10_000);
  expect(answer.status).toBe(200);
  const parsed = JSON.parse(answer.body) as { model: string; choices: { message: { role: string } }[] };
  expect(parsed.model).toBe(MODEL);
  expect(parsed.choices[0]!.message.role).toBe('assistant');
}

function refusalLines(): Record<string, unknown>[] {
  return lines.filter((l) => l.includes('connections refused')).map((l) => JSON.parse(l) as Record<string, unknown>);
}

it('a flood of idle connections neither locks valid clients out nor starves the daemon of descriptors', async () => {
  const home = await tmpHome();
  const baseUrl = await serveUnderLimit(home);
  await cliJson(['instances', 'add', 'one', '--model', MODEL, '--endpoint', sim.url], home);
  const key = (await cliJson<{ defaultKey: { secret: string } }>(['instances', 'ready', 'one'], home)).defaultKey
    .secret;
  const before = await openConnection(baseUrl);
  await expectServed(before, key);

  // One address: everything past its share is closed at once.
  const one = openIdle(baseUrl, '127.0.0.2', 3 * PER_ADDRESS);
  await eventually(() => one.closed() === 2 * PER_ADDRESS, 'the connections past the per-address cap closed', 10_000);
  const fresh = await openConnection(baseUrl);
  await expectServed(fresh, key);
  // The log is a pipe read apart from the sockets: its lines may come a moment later.
  await eventually(() => refusalLines().length > 0, 'the per-address refusal logged', 10_000);
  expect(refusalLines()).toEqual([
    expect.objectContaining({ level: 40, client: '127.0.0.2', limit: 'per-address', max: PER_ADDRESS }),
  ]);

  // Many addresses: the global cap holds, and the connection opened before the flood is still
  // served, upstream socket and all, as every client connection has its descriptor to spare.
  const others = ['127.0.0.3', '127.0.0.4', '127.0.0.5'].map((a) => openIdle(baseUrl, a, PER_ADDRESS));
  const sum = (): number => others.reduce((n, o) => n + o.closed(), 0);
  // Held now: `before`, `fresh`, 127.0.0.2's share and the first ones of the others up to the cap.
  const room = CAP - 2 - PER_ADDRESS;
  await eventually(() => sum() === 3 * PER_ADDRESS - room, 'the connections past the global cap closed', 10_000);
  await expectServed(before, key);
  before.close();
  fresh.close();
  const global = (): Record<string, unknown>[] => refusalLines().filter((l) => l.limit === 'global');
  await eventually(() => global().length > 0, 'the global refusal logged', 10_000);
  expect(global()).toEqual([expect.objectContaining({ level: 40, max: CAP })]);
  const requests = await sim.requests();
  expect(requests.filter((r) => r.path === '/v1/chat/completions' && r.completed)).toHaveLength(3);
});
