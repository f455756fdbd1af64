/* global process, console, Buffer */
/**
 * The reference: what a careful, minimal Node proxy reaches on the same machine. node:http in front,
 * one undici Pool behind, driven through `Pool.dispatch` with a handler object (the layer undici's
 * own `request` and `stream` are built on, and the one ob-proxy uses), the small request body
 * buffered and sent in one piece, the response streamed back as it arrives. No auth, no
 * validation, no id rewrite, no logging: the floor an honest Node gateway is measured against.
 * (`pool.request` with async iteration over the body costs about as much as ob-proxy itself:
 * promises and a Readable per request.)
 *
 * Usage: node bench/reference-proxy.mjs --upstream http://127.0.0.1:PORT
 * prints {"url": "..."} once listening.
 */
import { createServer } from 'node:http';
import { Pool } from 'undici';

const upstream = process.argv[process.argv.indexOf('--upstream') + 1];
// Unlimited connections, as ob-proxy: each one serves one client request.
const pool = new Pool(upstream, { connections: null, pipelining: 1, keepAliveTimeout: 4_000 });

// Hop-by-hop headers are the proxy's own business, never forwarded (RFC 9110 §7.6.1).
const HOP = new Set([
  'connection',
  'keep-alive',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'proxy-connection',
  'host',
  'authorization',
  'content-length',
]);

function forwardHeaders(raw) {
  const out = {};
  for (const [k, v] of Object.entries(raw)) if (!HOP.has(k)) out[k] = v;
  return out;
}

function fail(res, status, message) {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = JSON.stringify({ error: { message, type: 'proxy_error', code: null, param: null } });
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body);
}

/**
 * One exchange as an undici dispatch handler, the way a proxy built on undici forwards: the
 * status and headers written when they come, each body chunk written as it comes (paused while
 * the client's socket is full), the end ended; a client that leaves aborts the upstream request.
 */
class Forward {
  constructor(res) {
    this.res = res;
    this.controller = null;
    res.on('close', () => {
      if (!res.writableFinished) this.controller?.abort(new Error('client went away'));
    });
    res.on('drain', () => this.controller?.resume());
  }
  onRequestStart(controller) {
    this.controller = controller;
    if (this.res.destroyed) controller.abort(new Error('client went away'));
  }
  onResponseStart(_controller, statusCode, headers) {
    this.res.writeHead(statusCode, forwardHeaders(headers));
  }
  onResponseData(controller, chunk) {
    if (!this.res.write(chunk)) controller.pause();
  }
  onResponseEnd() {
    this.res.end();
  }
  onResponseError(_controller, err) {
    if (this.res.destroyed) return;
    fail(this.res, err?.code === 'UND_ERR_HEADERS_TIMEOUT' ? 504 : 502, `upstream: ${err?.message ?? err}`);
  }
}

const server = createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
  const parts = [];
  let size = 0;
  req.on('data', (c) => {
    parts.push(c);
    size += c.length;
  });
  req.on('end', () => {
    const body = parts.length === 1 ? parts[0] : Buffer.concat(parts, size);
    pool.dispatch(
      {
        method: req.method,
        path: req.url,
        headers: forwardHeaders(req.headers),
        body: req.method === 'GET' || req.method === 'HEAD' ? null : body,
      },
      new Forward(res),
    );
  });
});
server.maxRequestsPerSocket = 0;
server.listen(0, '127.0.0.1', () => {
  console.log(JSON.stringify({ url: `http://127.0.0.1:${server.address().port}` }));
});
process.on('SIGTERM', () => server.close(() => pool.close().then(() => process.exit(0))));
