/**
 * Raw HTTP/1.1 clients for the data plane, for what fetch and the SDKs cannot do: hold a body
 * back after the headers, and time each piece of a stream as it arrives.
 */
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { join } from 'node:path';
import { Client } from 'undici';

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

function parseResponse(text: string): RawResponse {
  // A 100 Continue may come first; the answer is the last head in the text.
  let rest = text;
  while (/^HTTP\/1\.1 100 /.test(rest)) rest = rest.slice(rest.indexOf('\r\n\r\n') + 4);
  const end = rest.indexOf('\r\n\r\n');
  const lines = rest.slice(0, end).split('\r\n');
  const status = Number((lines[0] ?? '').split(' ')[1]);
  const headers: Record<string, string> = {};
  for (const l of lines.slice(1)) {
    const at = l.indexOf(':');
    headers[l.slice(0, at).toLowerCase()] = l.slice(at + 1).trim();
  }
  const raw = rest.slice(end + 4);
  return { status, headers, body: headers['transfer-encoding'] === 'chunked' ? dechunk(raw) : raw };
}

/** The payload of a chunked body (as far as it came: a stream may be cut). */
function dechunk(raw: string): string {
  let out = '';
  let at = 0;
  for (;;) {
    const eol = raw.indexOf('\r\n', at);
    if (eol < 0) return out;
    const size = parseInt(raw.slice(at, eol), 16);
    if (!(size > 0)) return out;
    // Sizes count bytes; these bodies are ASCII apart from the simulator's text, which is too.
    out += raw.slice(eol + 2, eol + 2 + size);
    at = eol + 2 + size + 2;
  }
}

export interface HeldRequest {
  /**
   * Sends the body and resolves with the whole answer (the connection is closed after it). A
   * request refused on its headers (`refusedEarly`) sends nothing and resolves with the refusal.
   */
  send(): Promise<RawResponse>;
  close(): void;
  /** Answered on its headers alone, without a 100 Continue: its key was refused before the body. */
  refusedEarly: boolean;
}

/**
 * POSTs headers with `Expect: 100-continue` and holds the body back. Resolves once the proxy has
 * answered 100 Continue, which the auth hook writes once the key has passed its checks: by then
 * the request waits for its body. A request refused on its headers resolves with `refusedEarly`.
 */
export async function holdBody(
  baseUrl: string,
  key: string,
  body: string,
  path = '/v1/chat/completions',
): Promise<HeldRequest> {
  const url = new URL(baseUrl);
  const socket = connect(Number(url.port), url.hostname);
  socket.on('error', () => {});
  let text = '';
  const closed = new Promise<void>((r) => socket.once('close', () => r()));
  socket.setEncoding('utf8').on('data', (s: string) => {
    text += s;
  });
  await new Promise((r) => socket.once('connect', r));
  socket.write(
    `POST ${path} HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n`,
  );
  const deadline = Date.now() + 5_000;
  while (!text.startsWith('HTTP/1.1 100 ')) {
    // Refused on its headers (the key checked before the go-ahead): the connection is closed after it.
    if (text.startsWith('HTTP/1.1 ') && !text.startsWith('HTTP/1.1 100 ')) {
      await closed;
      return {
        send: () => Promise.resolve(parseResponse(text)),
        close() {
          socket.destroy();
        },
        refusedEarly: true,
      };
    }
    if (Date.now() > deadline) throw new Error(`no 100 Continue: ${JSON.stringify(text)}`);
    await new Promise((r) => setTimeout(r, 5));
  }
  return {
    refusedEarly: false,
    async send() {
      // Not end(): a client that half-closes is taken for gone, and its request aborted.
      socket.write(body);
      await closed;
      return parseResponse(text);
    },
    close() {
      socket.destroy();
    },
  };
}

export interface Piece {
  /** Date.now() when it arrived. */
  at: number;
  text: string;
}

export interface OpenStream {
  status: number;
  /** Every piece of the body as it arrived. */
  pieces: Piece[];
  /** Resolves when the response has ended (or the connection closed). */
  ended: Promise<void>;
  text(): string;
}

/** POSTs a chat request and resolves once the response head is here; the body keeps arriving. */
export function openChat(baseUrl: string, key: string, body: unknown): Promise<OpenStream> {
  const payload = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      `${baseUrl}/v1/chat/completions`,
      {
        method: 'POST',
        agent: false,
        headers: {
          authorization: `Bearer ${key}`,
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(payload),
        },
      },
      (res) => {
        const pieces: Piece[] = [];
        const ended = new Promise<void>((r) => {
          res.once('end', () => r());
          res.once('close', () => r());
        });
        res.setEncoding('utf8').on('data', (s: string) => pieces.push({ at: Date.now(), text: s }));
        resolve({ status: res.statusCode ?? 0, pieces, ended, text: () => pieces.map((p) => p.text).join('') });
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

/** The `data:` payloads of an SSE body, in order. */
export function sseData(text: string): string[] {
  return text
    .split('\n\n')
    .filter((e) => e.trim() !== '')
    .map((e) => e.replace(/^data: /, ''));
}

/** The content tokens in SSE pieces (the simulator's `tN ` tokens). */
export function tokensIn(text: string): number {
  let n = 0;
  for (const d of sseData(text)) {
    if (!d.startsWith('{')) continue;
    const c = (JSON.parse(d) as { choices?: { delta?: { content?: string } }[] }).choices?.[0]?.delta?.content;
    if (typeof c === 'string' && c !== '') n++;
  }
  return n;
}

/** The management API over the daemon's socket, as the CLI calls it (faster than a process). */
export class Management {
  private readonly client: Client;

  constructor(home: string) {
    this.client = new Client('http://ob-proxy', { socketPath: join(home, 'ob-proxy.sock') });
  }

  async call<T>(method: 'GET' | 'POST' | 'DELETE', path: string, body?: unknown): Promise<T> {
    const res = await this.client.request({
      method,
      path,
      ...(body === undefined ? {} : { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } }),
    });
    const text = await res.body.text();
    if (res.statusCode >= 300) throw new Error(`${method} ${path}: ${res.statusCode} ${text}`);
    return JSON.parse(text) as T;
  }

  close(): Promise<void> {
    return this.client.close();
  }
}
