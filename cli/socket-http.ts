import { once } from 'node:events';
import { type Socket, connect } from 'node:net';

/**
 * Just enough HTTP/1.1 to talk to the daemon's management socket: one request per connection
 * (`Connection: close`), a response read by Content-Length, chunked encoding or to the end.
 * Not node:http: on Node 24 loading it loads Node's bundled undici, http2 and tls, which took a
 * third of a CLI command's time; node:net is loaded anyway for stdio.
 */
export interface SocketResponse {
  status: number;
  headers: Map<string, string>;
  /** The decoded body, chunk by chunk; throws if the connection ends before the body does. */
  body: AsyncGenerator<Buffer>;
  /** Ends the connection (a follower that stops listening). */
  destroy(): void;
}

const MAX_HEAD = 64 * 1024;

function cut(): Error {
  return Object.assign(new Error('the daemon closed the connection mid-response'), { code: 'ECONNRESET' });
}

export async function socketRequest(
  socketPath: string,
  method: string,
  path: string,
  body: string | undefined,
  signal?: AbortSignal,
): Promise<SocketResponse> {
  const socket: Socket = connect(socketPath);
  const abort = (): void => void socket.destroy(Object.assign(new Error('aborted'), { name: 'AbortError' }));
  signal?.addEventListener('abort', abort, { once: true });
  try {
    await once(socket, 'connect');
    const payload = body === undefined ? undefined : Buffer.from(body, 'utf8');
    const head = [
      `${method} ${path} HTTP/1.1`,
      'Host: ob-proxy',
      'Connection: close',
      ...(payload === undefined ? [] : ['Content-Type: application/json', `Content-Length: ${payload.length}`]),
      '',
      '',
    ].join('\r\n');
    socket.write(payload === undefined ? head : Buffer.concat([Buffer.from(head, 'latin1'), payload]));
    const reader = (socket as AsyncIterable<Buffer>)[Symbol.asyncIterator]();
    let buf = Buffer.alloc(0);
    let end: number;
    while ((end = buf.indexOf('\r\n\r\n')) === -1) {
      if (buf.length > MAX_HEAD) throw new Error('the daemon sent an oversized response head');
      const next = await reader.next();
      if (next.done === true) throw cut();
      buf = Buffer.concat([buf, next.value]);
    }
    const [statusLine, ...lines] = buf.subarray(0, end).toString('latin1').split('\r\n');
    const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine ?? '')?.[1]);
    if (!Number.isInteger(status)) throw new Error('the daemon sent an unreadable response head');
    const headers = new Map<string, string>();
    for (const line of lines) {
      const at = line.indexOf(':');
      if (at > 0) headers.set(line.slice(0, at).trim().toLowerCase(), line.slice(at + 1).trim());
    }
    const rest = buf.subarray(end + 4);
    const chunked = /\bchunked\b/i.test(headers.get('transfer-encoding') ?? '');
    const length = headers.has('content-length') ? Number(headers.get('content-length')) : null;
    const decoded = chunked
      ? dechunk(rest, reader)
      : length !== null
        ? exactly(rest, reader, length)
        : toEnd(rest, reader);
    return {
      status,
      headers,
      body: (async function* () {
        try {
          yield* decoded;
        } finally {
          signal?.removeEventListener('abort', abort);
          socket.destroy();
        }
      })(),
      destroy: () => void socket.destroy(),
    };
  } catch (err) {
    signal?.removeEventListener('abort', abort);
    socket.destroy();
    throw err;
  }
}

async function* exactly(first: Buffer, reader: AsyncIterator<Buffer>, length: number): AsyncGenerator<Buffer> {
  let left = length;
  let chunk: Buffer | undefined = first;
  while (left > 0) {
    if (chunk === undefined) {
      const next = await reader.next();
      if (next.done === true) throw cut();
      chunk = next.value;
    }
    const take = chunk.subarray(0, left);
    left -= take.length;
    if (take.length > 0) yield take;
    chunk = undefined;
  }
}

async function* toEnd(first: Buffer, reader: AsyncIterator<Buffer>): AsyncGenerator<Buffer> {
  if (first.length > 0) yield first;
  for (let next = await reader.next(); next.done !== true; next = await reader.next()) yield next.value;
}

async function* dechunk(first: Buffer, reader: AsyncIterator<Buffer>): AsyncGenerator<Buffer> {
  let buf = first;
  const more = async (): Promise<void> => {
    const next = await reader.next();
    if (next.done === true) throw cut();
    buf = Buffer.concat([buf, next.value]);
  };
  for (;;) {
    let eol: number;
    while ((eol = buf.indexOf('\r\n')) === -1) await more();
    const size = Number.parseInt(buf.subarray(0, eol).toString('latin1').split(';')[0]!.trim(), 16);
    if (!Number.isInteger(size) || size < 0) throw new Error('the daemon sent an unreadable chunk');
    buf = buf.subarray(eol + 2);
    // The last chunk; trailers, if any, are not needed.
    if (size === 0) return;
    while (buf.length < size + 2) await more();
    yield buf.subarray(0, size);
    buf = buf.subarray(size + 2);
  }
}
