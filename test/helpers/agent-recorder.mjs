/* global Buffer, URL, setTimeout, clearTimeout */
/**
 * A recording reverse proxy on 127.0.0.1:0, put between a coding agent and a model server (real
 * Ollama, or the gateway): every request is recorded whole (method, path with its query string,
 * headers, body) and sent on unchanged, and the answer comes back to the agent as the server sent
 * it, streamed as it arrives. What the agent sent is then what the server received, byte for byte.
 *
 * And an outbound catcher: an HTTP proxy that forwards nothing. An agent whose HTTP_PROXY and
 * HTTPS_PROXY name it (NO_PROXY naming 127.0.0.1 and localhost) reaches 127.0.0.1 directly, and
 * every attempt to reach anything else (telemetry, updates, a model list, an error reporter) lands
 * here, is recorded and refused: a test asserts that it holds nothing. Plain JavaScript (typed by
 * agent-recorder.d.mts) so that the capture script, which is not compiled, shares it.
 */
import { createServer, request as httpRequest } from 'node:http';

/** Headers not sent on: hop-by-hop ones, and Host (the upstream's own). */
const HOP = new Set(['host', 'connection', 'keep-alive', 'transfer-encoding', 'proxy-connection', 'upgrade', 'te']);

function listen(server) {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve(server.address().port));
  });
}

function close(server) {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

/** What of an answer is kept, at most: enough to read what a server said, not a whole long stream. */
const ANSWER_CAP = 256 * 1024;

/**
 * Starts a recorder in front of `upstream` (a root URL such as http://127.0.0.1:11434). Each
 * exchange is appended to `exchanges` when its request has arrived whole, and completed (`status`,
 * `answer`, its first 256 KiB, `endedAt`) when the upstream's answer has ended.
 *
 * `script(exchange)`, when given, may answer a request itself instead of the upstream: it returns
 * `{ status, headers, body }` (the exchange is then marked `scripted`) or null to send it on. The
 * capture script answers a chosen request with a tool call this way, so that the agent's next
 * request carries the call and its result (a random-weight model never calls a tool on its own).
 */
export async function startRecorder(upstream, { script } = {}) {
  const target = new URL(upstream);
  const exchanges = [];
  const waiters = new Set();
  const notify = () => {
    for (const w of [...waiters]) w();
  };
  const server = createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const headers = {};
      for (const [k, v] of Object.entries(req.headers)) if (!HOP.has(k)) headers[k] = v;
      const x = {
        method: req.method,
        path: req.url,
        headers,
        body: body.toString('utf8'),
        receivedAt: Date.now(),
        status: null,
        answer: null,
        endedAt: null,
        scripted: false,
        clientLeft: false,
      };
      exchanges.push(x);
      notify();
      const own = script?.(x) ?? null;
      if (own !== null) {
        x.scripted = true;
        x.status = own.status;
        x.answer = own.body;
        res.writeHead(own.status, own.headers);
        res.end(own.body, () => {
          x.endedAt = Date.now();
          notify();
        });
        return;
      }
      const out = httpRequest(
        {
          host: target.hostname,
          port: target.port,
          method: req.method,
          path: req.url,
          headers: { ...headers, host: target.host, 'content-length': String(body.length) },
        },
        (up) => {
          x.status = up.statusCode;
          const kept = [];
          let size = 0;
          const end = () => {
            if (x.endedAt !== null) return;
            x.answer = Buffer.concat(kept).subarray(0, ANSWER_CAP).toString('utf8');
            x.endedAt = Date.now();
            notify();
          };
          res.writeHead(up.statusCode ?? 502, up.headers);
          up.on('data', (c) => {
            if (size < ANSWER_CAP) kept.push(c);
            size += c.length;
            res.write(c);
          });
          up.on('end', () => {
            end();
            res.end();
          });
          // Cut short: the upstream failed, or the agent left (below) once it had what it needed.
          up.on('close', end);
          up.on('error', () => res.destroy());
        },
      );
      out.on('error', (err) => {
        if (x.endedAt !== null) return;
        x.status ??= 502;
        x.answer ??= `recorder: upstream ${upstream} unreachable: ${err.message}`;
        x.endedAt = Date.now();
        if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
        res.end(x.answer);
        notify();
      });
      // The agent went away: so does the upstream request.
      res.on('close', () => {
        if (res.writableFinished) return;
        x.clientLeft = true;
        out.destroy();
      });
      out.end(body);
    });
  });
  const port = await listen(server);
  return {
    url: `http://127.0.0.1:${port}`,
    exchanges,
    /** Resolves once `pred(exchanges)` holds, checked at each arrival and end; rejects after `ms`. */
    until(pred, ms, what) {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (!pred(exchanges)) return;
          waiters.delete(check);
          clearTimeout(timer);
          resolve();
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`recorder: ${what} not seen within ${ms} ms (${exchanges.length} requests)`));
        }, ms);
        waiters.add(check);
        check();
      });
    },
    close: () => close(server),
  };
}

/** Starts an outbound catcher: `hits` lists every request an agent tried to send past 127.0.0.1. */
export async function startOutboundCatcher() {
  const hits = [];
  const server = createServer((req, res) => {
    hits.push(`${req.method} ${req.url}`);
    req.resume();
    res.writeHead(403, { 'content-type': 'text/plain' });
    res.end('outbound traffic refused by the test');
  });
  // HTTPS through a proxy: CONNECT host:443, refused before any byte reaches the host.
  server.on('connect', (req, socket) => {
    hits.push(`CONNECT ${req.url}`);
    socket.end('HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n');
  });
  const port = await listen(server);
  return { url: `http://127.0.0.1:${port}`, hits, close: () => close(server) };
}
