/* global console, Buffer, URL */
/**
 * What one request in flight keeps alive in the daemon: the young generation's cost under
 * contention is the copying of exactly this (docs/performance.md, session 8). The upstream here
 * holds every request it receives (a plain one unanswered; a stream after its first frame), so
 * N requests are in flight at once; a heap snapshot taken then, less one taken idle after the
 * same warm-up, divided by N, is what each keeps reachable, by constructor.
 *
 * Usage: node bench/heap-inflight.mjs DIR[+ops|+pg] [DIR…] [--n 400] [--kind plain|stream] [--top 25]
 */
import { createServer, Agent, request } from 'node:http';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { drive, startVariant, wait } from './native-harness.mjs';

const { values: a, positionals: dirs } = parseArgs({
  allowPositionals: true,
  options: { n: { type: 'string' }, kind: { type: 'string' }, top: { type: 'string' }, postgres: { type: 'string' } },
});
const N = Number(a.n ?? 400);
const KIND = a.kind ?? 'plain';
const TOP = Number(a.top ?? 25);

const MODELS = '{"object":"list","data":[{"id":"gemma4:26b","object":"model","created":0,"owned_by":"library"}]}';
const PLAIN = JSON.stringify({
  id: 'chatcmpl-h',
  object: 'chat.completion',
  created: 1,
  model: 'gemma4:26b',
  choices: [{ index: 0, message: { role: 'assistant', content: 'hello there' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 },
});
const frame = (c) =>
  `data: {"id":"chatcmpl-h","object":"chat.completion.chunk","created":1,"model":"gemma4:26b","choices":[{"index":0,"delta":{"content":"${c}"},"finish_reason":null}]}\n\n`;
const END =
  'data: {"id":"chatcmpl-h","object":"chat.completion.chunk","created":1,"model":"gemma4:26b","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n' +
  'data: {"id":"chatcmpl-h","object":"chat.completion.chunk","created":1,"model":"gemma4:26b","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}\n\ndata: [DONE]\n\n';

/** An upstream that answers at once, or holds what it gets until `release()`. */
async function holdingUpstream() {
  let holding = false;
  const held = [];
  let waiter = null;
  const server = createServer((req, res) => {
    const parts = [];
    req.on('data', (c) => parts.push(c));
    req.on('end', () => {
      if (req.method === 'GET') return void res.writeHead(200, { 'content-type': 'application/json' }).end(MODELS);
      const stream = Buffer.concat(parts).includes('"stream":true');
      const answer = () => {
        if (stream) res.end(frame('there') + END);
        else res.writeHead(200, { 'content-type': 'application/json' }).end(PLAIN);
      };
      if (stream) res.writeHead(200, { 'content-type': 'text/event-stream' }).write(frame('hello'));
      if (!holding) return answer();
      held.push(answer);
      if (waiter !== null && held.length >= waiter.n) waiter.done();
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    hold: () => void (holding = true),
    until: (n) => new Promise((done) => (held.length >= n ? done() : (waiter = { n, done }))),
    release: () => {
      holding = false;
      for (const answer of held.splice(0)) answer();
    },
    stop: () => new Promise((r) => server.close(r)),
  };
}

/** Nodes of a V8 heap snapshot by `type:name`, with count and self size. */
function census(file) {
  const snap = JSON.parse(readFileSync(file, 'utf8'));
  const fields = snap.snapshot.meta.node_fields;
  const types = snap.snapshot.meta.node_types[0];
  const width = fields.length;
  const [iType, iName, iSize] = ['type', 'name', 'self_size'].map((f) => fields.indexOf(f));
  const out = new Map();
  const nodes = snap.nodes;
  for (let i = 0; i < nodes.length; i += width) {
    const type = types[nodes[i + iType]];
    let name = type === 'object' || type === 'closure' || type === 'native' ? snap.strings[nodes[i + iName]] : '';
    if (name.length > 60) name = name.slice(0, 60);
    const k = `${type}:${name}`;
    const e = out.get(k) ?? { n: 0, bytes: 0 };
    e.n++;
    e.bytes += nodes[i + iSize];
    out.set(k, e);
  }
  return out;
}

async function snapshot(daemon, dir) {
  const before = new Set(readdirSync(dir));
  daemon.proc.kill('SIGUSR2');
  for (let i = 0; i < 600; i++) {
    await wait(100);
    const f = readdirSync(dir).find((x) => !before.has(x) && x.endsWith('.heapsnapshot'));
    if (f !== undefined) {
      const path = join(dir, f);
      // Written in pieces while the daemon goes on: parsed once it is whole.
      for (let j = 0; j < 600; j++) {
        try {
          return census(path);
        } catch {
          await wait(500);
        }
      }
    }
  }
  throw new Error('no heap snapshot');
}

function fire(url, secret, body, n) {
  const agent = new Agent({ keepAlive: true, maxSockets: n });
  const headers = {
    authorization: `Bearer ${secret}`,
    'content-type': 'application/json',
    'content-length': String(body.length),
  };
  const all = [];
  for (let i = 0; i < n; i++)
    all.push(
      new Promise((done) => {
        const req = request(new URL('/v1/chat/completions', url), { method: 'POST', agent, headers }, (res) => {
          res.resume();
          res.on('end', () => done(res.statusCode));
        });
        req.on('error', () => done(0));
        req.end(body);
      }),
    );
  return { all: Promise.all(all), agent };
}

async function measure(spec) {
  const dir = mkdtempSync(join(tmpdir(), 'obheap-'));
  const upstream = await holdingUpstream();
  const daemon = await startVariant(spec, {
    pgServer: a.postgres,
    upstream,
    cwd: dir,
    nodeArgs: ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${dir}`],
  });
  try {
    const body = JSON.stringify({
      model: 'gemma4:26b',
      messages: [{ role: 'user', content: 'Say hello.' }],
      ...(KIND === 'stream' ? { stream: true, stream_options: { include_usage: true } } : {}),
    });
    await drive(daemon.url, daemon.secret, Buffer.from(body), KIND, 3000, 32);
    // The same number of sockets open in both snapshots: the client's keep-alive ones are opened
    // here and stay, so the difference is the requests', not their connections'.
    upstream.hold();
    const first = fire(daemon.url, daemon.secret, body, N);
    await upstream.until(N);
    await wait(500);
    const busy = await snapshot(daemon, dir);
    upstream.release();
    const codes = await first.all;
    if (codes.some((c) => c !== 200)) throw new Error(`answers: ${[...new Set(codes)].join(',')}`);
    await wait(500);
    const idle = await snapshot(daemon, dir);
    first.agent.destroy();
    return { busy, idle };
  } finally {
    await daemon.stop();
    await upstream.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

const results = [];
for (const spec of dirs) results.push({ spec, ...(await measure(spec)) });
const rows = new Map();
for (const [i, r] of results.entries())
  for (const [k, b] of r.busy) {
    const idle = r.idle.get(k) ?? { n: 0, bytes: 0 };
    const row = rows.get(k) ?? results.map(() => ({ n: 0, bytes: 0 }));
    row[i] = { n: (b.n - idle.n) / N, bytes: (b.bytes - idle.bytes) / N };
    rows.set(k, row);
  }
const total = results.map((_, i) => [...rows.values()].reduce((s, row) => s + row[i].bytes, 0));
const count = results.map((_, i) => [...rows.values()].reduce((s, row) => s + row[i].n, 0));
console.log(`# per ${KIND} request in flight (${N} held), snapshot difference ÷ ${N}`);
console.log(`| kind:name | ${results.map((r) => `${r.spec} objects | bytes`).join(' | ')} |`);
console.log(`|---|${results.map(() => '---|---').join('|')}|`);
console.log(`| **all** | ${results.map((_, i) => `${count[i].toFixed(1)} | ${total[i].toFixed(0)}`).join(' | ')} |`);
const sorted = [...rows.entries()].sort(
  (x, y) => Math.max(...y[1].map((e) => Math.abs(e.bytes))) - Math.max(...x[1].map((e) => Math.abs(e.bytes))),
);
for (const [k, row] of sorted.slice(0, TOP))
  console.log(`| ${k} | ${row.map((e) => `${e.n.toFixed(2)} | ${e.bytes.toFixed(0)}`).join(' | ')} |`);
