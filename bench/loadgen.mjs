/* global process, console, setTimeout, performance, URL */
/**
 * The bench's own load generator, run as a separate process: what wrk cannot measure (time to
 * first streamed chunk, whether every chunk arrived in order, thousands of held streams), and
 * every scenario when wrk is not installed. node:http with keep-alive sockets, one per worker.
 *
 * Usage: node bench/loadgen.mjs '<json options>'  → one JSON line of results on stdout.
 * Options: url, path, headers, bodyFile, concurrency, durationMs, warmupMs, once (each worker
 * sends one request; for held streams), rampPerTick, expectChunks (validate streams).
 */
import { Agent, request } from 'node:http';
import { readFileSync } from 'node:fs';

const o = JSON.parse(process.argv[2]);
const body = readFileSync(o.bodyFile);
const target = new URL(o.path, o.url);
const agent = new Agent({ keepAlive: true, maxSockets: o.concurrency, maxFreeSockets: o.concurrency });
const headers = { ...o.headers, 'content-type': 'application/json', 'content-length': String(body.length) };

const latencies = [];
const firsts = [];
let errors = 0;
/** The first few failures, for the report: a count alone does not say what broke. */
const errorSamples = [];
const failed = (err) => {
  if (measuring) errors++;
  if (errorSamples.length < 3) errorSamples.push(`${err.code ?? ''} ${err.message}`.trim());
};
let non200 = 0;
let badStreams = 0;
let mergedReads = 0;
let open = 0;
let maxOpen = 0;
let measuring = o.warmupMs === 0 || o.warmupMs === undefined;

/** Every content frame t0…t(n-1) present, in order, and the stream ended with [DONE]. */
function validStream(text, n) {
  let at = 0;
  for (let i = 0; i < n; i++) {
    at = text.indexOf(`"content":"t${i} "`, at);
    if (at === -1) return false;
  }
  return text.trimEnd().endsWith('data: [DONE]');
}

function once() {
  return new Promise((resolve) => {
    const t0 = performance.now();
    let first = -1;
    let text = '';
    const req = request(target, { method: 'POST', agent, headers }, (res) => {
      open++;
      if (open > maxOpen) maxOpen = open;
      res.setEncoding('utf8');
      res.on('data', (chunk) => {
        if (first < 0) first = performance.now() - t0;
        if (o.expectChunks !== undefined) {
          text += chunk;
          const a = chunk.indexOf('"content":"t');
          if (a !== -1 && chunk.indexOf('"content":"t', a + 1) !== -1 && measuring) mergedReads++;
        }
      });
      res.on('end', () => {
        open--;
        const total = performance.now() - t0;
        if (measuring) {
          if (res.statusCode !== 200) non200++;
          else if (o.expectChunks !== undefined && !validStream(text, o.expectChunks)) badStreams++;
          latencies.push(total);
          firsts.push(first);
        }
        resolve();
      });
      res.on('error', (err) => {
        open--;
        failed(err);
        resolve();
      });
    });
    req.on('error', (err) => {
      failed(err);
      resolve();
    });
    req.end(body);
  });
}

function pct(sorted, p) {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

const started = performance.now();
if (o.once) {
  const all = [];
  const perTick = o.rampPerTick ?? 100;
  for (let i = 0; i < o.concurrency; i++) {
    all.push(once());
    if ((i + 1) % perTick === 0) await new Promise((r) => setTimeout(r, 10));
  }
  await Promise.all(all);
} else {
  const warmEnd = started + (o.warmupMs ?? 0);
  const end = warmEnd + o.durationMs;
  let measureStart = started;
  if (!measuring) {
    setTimeout(() => {
      measuring = true;
      measureStart = performance.now();
    }, o.warmupMs);
  }
  const worker = async () => {
    while (performance.now() < end) await once();
  };
  await Promise.all(Array.from({ length: o.concurrency }, worker));
  o.measuredMs = performance.now() - measureStart;
}
const elapsed = o.measuredMs ?? performance.now() - started;
latencies.sort((a, b) => a - b);
firsts.sort((a, b) => a - b);
console.log(
  JSON.stringify({
    requests: latencies.length,
    errors,
    errorSamples,
    non200,
    badStreams,
    mergedReads,
    maxOpen,
    rps: (latencies.length / elapsed) * 1000,
    p50: pct(latencies, 50),
    p99: pct(latencies, 99),
    firstP50: pct(firsts, 50),
    firstP99: pct(firsts, 99),
  }),
);
agent.destroy();
