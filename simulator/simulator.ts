/**
 * A simulated Ollama model server (`ob-proxy simulate`): a plain `node:http` server speaking
 * Ollama's OpenAI-compatible API (Ollama's openai/openai.go) and its own (`/api/chat`,
 * `/api/generate`, `/api/embed`, `/api/tags`, `/api/ps`, `/api/show`, `/api/version`), with failure modes, per-request directives
 * and request recording, for the demo, end-to-end and fault tests, and benchmarks.
 *
 *   const sim = buildSimulator({ models: ['gemma4:26b'] });
 *   const baseUrl = await sim.listen(0);          // "http://127.0.0.1:PORT"
 *   …                                             // POST `${baseUrl}/v1/chat/completions`
 *   await sim.waitFor((r) => r.aborted);
 *   await sim.close();
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { handleChat, sendJson } from './sim-chat.js';
import { type ChatEnv, type Job, type ParsedBody } from './sim-job.js';
import { knobsOf, normalizePatch, SimConfigError } from './sim-directives.js';
import { isLoopbackAddress, makeHostCheck } from './sim-host-check.js';
import { Recorder } from './sim-recorder.js';
import { errorBody } from './sim-responses.js';
import { handleResponses, routeMissing } from './sim-responses-api.js';
import { handleCompletions } from './sim-completions.js';
import { handleMessages } from './sim-messages.js';
import { handleNativeChat, handleNativeEmbed, handleNativeGenerate } from './sim-native.js';
import { LoadedModels, handlePs, handleShow, handleTags } from './sim-native-info.js';
import {
  DEFAULT_KNOBS,
  DEFAULT_RECORD_LIMIT,
  type Knobs,
  type RecordedRequest,
  type Simulator,
  type SimulatorOptions,
  type SimulatorStats,
} from './sim-types.js';

export type { FailMode, RecordedRequest, Simulator, SimulatorOptions, SimulatorStats } from './sim-types.js';
export type { Flavor } from './sim-agent.js';
export { FAIL_MODES } from './sim-types.js';
export { SimConfigError } from './sim-directives.js';

const TEXT_CT = 'text/plain; charset=utf-8';
const GIN_JSON_CT = 'application/json; charset=utf-8';
const VERSION_BODY = '{"version":"0.33.0-sim"}';
/** Ollama's own API's POST routes (sim-native.ts, sim-native-info.ts). */
const NATIVE_POSTS = new Set(['/api/chat', '/api/generate', '/api/embed', '/api/show']);

/** Go's json decoder wording for bodies that do not parse (approximate, from V8's message). */
function parseBody(raw: string): ParsedBody {
  if (raw.trim() === '') return { ok: false, message: 'EOF' };
  try {
    return { ok: true, value: JSON.parse(raw) };
  } catch (e) {
    const msg = e instanceof Error ? e.message : '';
    const token = /Unexpected token '(.)'/.exec(msg)?.[1];
    if (token !== undefined)
      return { ok: false, message: `invalid character '${token}' looking for beginning of value` };
    const at = Number(/at position (\d+)/.exec(msg)?.[1] ?? NaN);
    if (/end of (JSON )?input|Unterminated/i.test(msg) || at >= raw.trimEnd().length)
      return { ok: false, message: 'unexpected EOF' };
    return {
      ok: false,
      message: `invalid character '${Number.isNaN(at) ? '?' : raw.charAt(at)}' after top-level value`,
    };
  }
}

function readBody(req: IncomingMessage, done: (raw: string) => void): void {
  const parts: Buffer[] = [];
  req.on('data', (b: Buffer) => parts.push(b));
  req.on('end', () =>
    done(parts.length === 1 ? (parts[0] as Buffer).toString('utf8') : Buffer.concat(parts).toString('utf8')),
  );
}

export function buildSimulator(options: SimulatorOptions): Simulator {
  const initial = normalizePatch(options);
  let models = new Set(initial.models ?? []);
  let knobs: Readonly<Knobs> = { ...DEFAULT_KNOBS, ...knobsOf(initial) };
  let recordLimit = initial.recordLimit ?? DEFAULT_RECORD_LIMIT;
  let agent = { reasoning: initial.reasoning ?? false, flavor: initial.flavor ?? ('ollama' as const) };
  let responses = initial.responses ?? true;
  let completions = initial.completions ?? true;
  let messages = initial.messages ?? true;
  const recorder = new Recorder(recordLimit);
  const jobs = new Set<Job>();
  const hostAllowed = makeHostCheck();
  const bornAt = Math.floor(Date.now() / 1000);
  const loaded = new LoadedModels();
  let hostCheck = true;
  let closing = false;
  let holding: { done: Promise<void>; release: () => void } | null = null;

  const env: ChatEnv = {
    hasModel: (m) => models.has(m),
    knobs: () => knobs,
    agent: () => agent,
    changed: (r) => recorder.changed(r),
    held: () => holding?.done ?? null,
  };

  const release = (): void => {
    const h = holding;
    holding = null;
    h?.release();
  };

  const configure = (patch: Partial<SimulatorOptions>): void => {
    const p = normalizePatch(patch);
    if (p.models !== undefined) models = new Set(p.models);
    if (p.recordLimit !== undefined) {
      recordLimit = p.recordLimit;
      recorder.resize(recordLimit);
    }
    knobs = { ...knobs, ...knobsOf(p) };
    agent = { reasoning: p.reasoning ?? agent.reasoning, flavor: p.flavor ?? agent.flavor };
    if (p.responses !== undefined) responses = p.responses;
    if (p.completions !== undefined) completions = p.completions;
    if (p.messages !== undefined) messages = p.messages;
  };

  const currentOptions = (): SimulatorOptions => ({
    models: [...models],
    ...knobs,
    recordLimit,
    ...agent,
    responses,
    completions,
    messages,
  });

  const modelObject = (id: string): string =>
    `{"id":${JSON.stringify(id)},"object":"model","created":${bornAt},"owned_by":"library"}`;

  const onResponseClose = (job: Job): void => {
    job.done = true;
    if (job.timer !== null) clearTimeout(job.timer);
    job.timer = null;
    jobs.delete(job);
    const outcome = job.res.writableFinished ? 'completed' : job.cut || closing ? 'cut' : 'aborted';
    recorder.end(job.record, outcome);
  };

  const control = (req: IncomingMessage, res: ServerResponse, path: string): void => {
    const route = `${req.method ?? ''} ${path}`;
    if (route === 'GET /_sim/requests') sendJson(res, 200, JSON.stringify(recorder.list()));
    else if (route === 'DELETE /_sim/requests') sendJson(res, 200, JSON.stringify({ cleared: recorder.clear() }));
    else if (route === 'GET /_sim/stats') sendJson(res, 200, JSON.stringify(recorder.counters));
    else if (route === 'GET /_sim/config') sendJson(res, 200, JSON.stringify(currentOptions()));
    else if (route === 'POST /_sim/config') {
      readBody(req, (raw) => {
        try {
          const parsed = parseBody(raw);
          if (!parsed.ok) throw new SimConfigError(`invalid JSON: ${parsed.message}`);
          configure(parsed.value as Partial<SimulatorOptions>);
          sendJson(res, 200, JSON.stringify(currentOptions()));
        } catch (e) {
          const msg = e instanceof Error ? e.message : String(e);
          sendJson(res, 400, errorBody(400, msg));
        }
      });
    } else notFound(res);
  };

  const notFound = (res: ServerResponse): void => {
    res.writeHead(404, { 'Content-Type': 'text/plain' });
    res.end('404 page not found');
  };

  const route = (req: IncomingMessage, res: ServerResponse, job: Job, path: string): void => {
    const method = req.method ?? 'GET';
    const get = method === 'GET' || method === 'HEAD';
    if (method === 'POST' && path === '/v1/chat/completions') {
      readBody(req, (raw) => {
        const parsed = parseBody(raw);
        job.record.body = parsed.ok ? parsed.value : raw;
        recorder.changed(job.record);
        if (!job.done) handleChat(job, parsed, env);
      });
      return;
    }
    if (method === 'POST' && path === '/v1/responses') {
      readBody(req, (raw) => {
        const parsed = parseBody(raw);
        job.record.body = parsed.ok ? parsed.value : raw;
        recorder.changed(job.record);
        if (job.done) return;
        if (responses) handleResponses(job, parsed, env);
        else routeMissing(job);
      });
      return;
    }
    // Legacy completions and Anthropic's Messages, each with its switch (an Ollama before 0.14 lacks /v1/messages).
    const other =
      path === '/v1/completions'
        ? completions
          ? handleCompletions
          : null
        : path === '/v1/messages'
          ? messages
            ? handleMessages
            : null
          : undefined;
    if (method === 'POST' && other !== undefined) {
      readBody(req, (raw) => {
        const parsed = parseBody(raw);
        job.record.body = parsed.ok ? parsed.value : raw;
        recorder.changed(job.record);
        if (job.done) return;
        if (other === null) routeMissing(job);
        else other(job, parsed, env);
      });
      return;
    }
    if (method === 'POST' && NATIVE_POSTS.has(path)) {
      readBody(req, (raw) => {
        const parsed = parseBody(raw);
        job.record.body = parsed.ok ? parsed.value : raw;
        recorder.changed(job.record);
        if (job.done) return;
        if (path === '/api/chat') handleNativeChat(job, parsed, env, loaded);
        else if (path === '/api/generate') handleNativeGenerate(job, parsed, env, loaded);
        else if (path === '/api/embed') handleNativeEmbed(job, parsed, env, loaded);
        else handleShow(res, parsed, (m) => models.has(m), bornAt * 1000);
      });
      return;
    }
    recorder.changed(job.record);
    if (get && path === '/api/tags') handleTags(res, models, bornAt * 1000);
    else if (get && path === '/api/ps') handlePs(res, loaded);
    else if (get && path === '/v1/models') {
      const data = models.size === 0 ? 'null' : `[${[...models].map(modelObject).join(',')}]`;
      sendJson(res, 200, `{"object":"list","data":${data}}\n`);
    } else if (get && path.startsWith('/v1/models/') && path.indexOf('/', 11) < 0) {
      let id: string;
      try {
        id = decodeURIComponent(path.slice(11));
      } catch {
        id = path.slice(11);
      }
      if (models.has(id)) sendJson(res, 200, `${modelObject(id)}\n`);
      else sendJson(res, 404, errorBody(404, `model '${id}' not found`));
    } else if (get && path === '/') {
      res.writeHead(200, { 'Content-Type': TEXT_CT });
      res.end('Ollama is running');
    } else if (get && path === '/api/version') {
      sendJson(res, 200, VERSION_BODY, GIN_JSON_CT);
    } else {
      notFound(res);
    }
  };

  const server = createServer((req, res) => {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    if (path.startsWith('/_sim/')) {
      control(req, res, path);
      return;
    }
    const job: Job = {
      res,
      socket: req.socket,
      record: recorder.begin(req.method ?? '', path, req.headers),
      timer: null,
      done: false,
      cut: false,
    };
    jobs.add(job);
    res.on('close', () => onResponseClose(job));
    if (hostCheck && !hostAllowed(req.headers.host)) {
      recorder.changed(job.record);
      res.writeHead(403, { 'Content-Length': '0' });
      res.end();
      return;
    }
    route(req, res, job, path);
  });
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  server.on('connection', (socket) => socket.setNoDelay(true));

  return {
    listen(port: number, host = '127.0.0.1'): Promise<string> {
      return new Promise<string>((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, host, () => {
          server.off('error', reject);
          const addr = server.address() as AddressInfo;
          hostCheck = isLoopbackAddress(addr.address);
          const shown = addr.address === '0.0.0.0' || addr.address === '::' ? '127.0.0.1' : addr.address;
          resolve(`http://${shown.includes(':') ? `[${shown}]` : shown}:${addr.port}`);
        });
      });
    },

    close(): Promise<void> {
      closing = true;
      release();
      recorder.rejectWaiters('simulator closed');
      for (const job of jobs) {
        if (job.timer !== null) clearTimeout(job.timer);
        job.timer = null;
        job.done = true;
      }
      return new Promise<void>((resolve) => {
        if (!server.listening) {
          resolve();
          return;
        }
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },

    get requests(): RecordedRequest[] {
      return recorder.list();
    },

    get stats(): SimulatorStats {
      return { ...recorder.counters };
    },

    configure,

    waitFor(predicate: (r: RecordedRequest) => boolean, timeoutMs = 5000): Promise<RecordedRequest> {
      if (closing) return Promise.reject(new Error('simulator closed'));
      return recorder.waitFor(predicate, timeoutMs);
    },

    hold(): () => void {
      if (holding === null) {
        let open!: () => void;
        const done = new Promise<void>((resolve) => (open = resolve));
        holding = { done, release: open };
      }
      const mine = holding;
      // Releases only the hold it made: a stale function from an earlier hold is a no-op.
      return () => {
        if (holding === mine) release();
      };
    },
  };
}
