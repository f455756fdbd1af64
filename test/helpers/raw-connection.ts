/**
 * One raw HTTP/1.1 connection to the data plane, kept open across requests: for what fetch and
 * the SDKs hide, which connection an answer came on, whether the proxy kept it, and a body
 * announced and never sent.
 */
import { type Socket, connect } from 'node:net';
import { eventually } from './processes.js';

export interface RawAnswer {
  status: number;
  /** Header names in lower case. */
  headers: Record<string, string>;
  body: string;
}

export interface RawConnection {
  socket: Socket;
  write(data: string | Buffer): void;
  /** The next whole answer on the connection (its head, then Content-Length bytes of body). */
  answer(timeoutMs?: number): Promise<RawAnswer>;
  /** True once the proxy has ended the connection (its FIN or a reset). */
  ended(): boolean;
  close(): void;
}

/**
 * `halfOpen`: the client does not end its side when the proxy ends its own, as a client still
 * sending a body does not; without it, a proxy's FIN is answered with ours at once.
 */
export async function openConnection(baseUrl: string, opts: { halfOpen?: boolean } = {}): Promise<RawConnection> {
  const url = new URL(baseUrl);
  const socket = connect({ port: Number(url.port), host: url.hostname, allowHalfOpen: opts.halfOpen === true });
  let buf = Buffer.alloc(0);
  let ended = false;
  socket.on('data', (d: Buffer) => {
    buf = Buffer.concat([buf, d]);
  });
  socket.on('end', () => {
    ended = true;
  });
  socket.on('close', () => {
    ended = true;
  });
  socket.on('error', () => {
    ended = true;
  });
  await new Promise((r) => socket.once('connect', r));

  function take(): RawAnswer | undefined {
    const end = buf.indexOf('\r\n\r\n');
    if (end < 0) return undefined;
    const lines = buf.subarray(0, end).toString('latin1').split('\r\n');
    const headers: Record<string, string> = {};
    for (const l of lines.slice(1)) {
      const at = l.indexOf(':');
      headers[l.slice(0, at).toLowerCase()] = l.slice(at + 1).trim();
    }
    const length = Number(headers['content-length'] ?? 0);
    if (buf.length < end + 4 + length) return undefined;
    const body = buf.subarray(end + 4, end + 4 + length).toString('utf8');
    buf = buf.subarray(end + 4 + length);
    return { status: Number((lines[0] ?? '').split(' ')[1]), headers, body };
  }

  return {
    socket,
    write: (data) => {
      socket.write(data);
    },
    answer: (timeoutMs = 5_000) =>
      eventually(take, `an answer on the connection (so far ${JSON.stringify(buf.toString('latin1'))})`, timeoutMs),
    ended: () => ended,
    close: () => {
      socket.destroy();
    },
  };
}

/** The head of a POST /v1/chat/completions that announces `length` bytes of body. */
export function chatHead(host: string, key: string | null, length: number | 'chunked', extra = ''): string {
  return (
    `POST /v1/chat/completions HTTP/1.1\r\nHost: ${host}\r\n${key === null ? '' : `Authorization: Bearer ${key}\r\n`}` +
    `Content-Type: application/json\r\n${length === 'chunked' ? 'Transfer-Encoding: chunked' : `Content-Length: ${length}`}\r\n${extra}\r\n`
  );
}
