/**
 * A TCP relay in front of a real model server that holds a stream after its first event: the
 * relay passes the server's bytes until the first event of a streamed answer (SSE, or Ollama's
 * NDJSON) has gone through, then stops reading from the server. The client of the relay (the gateway) has a stream
 * begun and unfinished for as long as the test needs, however fast the server generates, so a
 * test acts mid-stream by construction, not by racing the model. When the gateway closes its side
 * (it aborted the upstream request), the relay closes the server's connection: the server sees
 * its client leave, as it would without the relay.
 */
import { once } from 'node:events';
import { type AddressInfo, type Server, type Socket, connect, createServer } from 'node:net';

export interface HeldRelay {
  /** `http://127.0.0.1:PORT`, an instance's endpoint. */
  readonly url: string;
  /** Streams held so far (their first event passed, nothing after it). */
  readonly held: number;
  /** Connections the gateway closed while their stream was held. */
  readonly abortedWhileHeld: number;
  close(): Promise<void>;
}

/** The streams held, by content type: how an event of each ends. */
const EVENT_ENDS = [
  { type: 'text/event-stream', end: '\n\n' },
  { type: 'application/x-ndjson', end: '\n' },
];

/**
 * Where a held stream is cut: after its first event (an SSE event, or an NDJSON line), or null
 * while that event is not whole. A chunked body's first chunk-size line is not the event's end.
 */
function firstEventEnd(seen: string): number | null {
  for (const { type, end } of EVENT_ENDS) {
    const at = seen.lastIndexOf(type);
    if (at < 0) continue;
    const headersEnd = seen.indexOf('\r\n\r\n', at);
    if (headersEnd < 0) return null;
    let body = headersEnd + 4;
    if (/transfer-encoding:\s*chunked/i.test(seen.slice(seen.lastIndexOf('HTTP/1.1 ', at), headersEnd))) {
      const sizeEnd = seen.indexOf('\r\n', body);
      if (sizeEnd < 0) return null;
      body = sizeEnd + 2;
    }
    const eventEnd = seen.indexOf(end, body);
    return eventEnd < 0 ? null : eventEnd + end.length;
  }
  return null;
}

export async function startHeldRelay(target: string): Promise<HeldRelay> {
  const { hostname, port } = new URL(target);
  let held = 0;
  let abortedWhileHeld = 0;
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(Number(port), hostname);
    sockets.add(client).add(upstream);
    let seen = '';
    let holding = false;
    client.on('data', (chunk) => upstream.write(chunk));
    upstream.on('data', (chunk: Buffer) => {
      if (holding) return;
      const before = seen.length;
      seen += chunk.toString('latin1');
      const cut = firstEventEnd(seen);
      if (cut === null) {
        client.write(chunk);
        return;
      }
      client.write(chunk.subarray(0, cut - before));
      holding = true;
      held += 1;
      upstream.pause();
    });
    const end = (): void => {
      client.destroy();
      upstream.destroy();
    };
    client.on('close', () => {
      if (holding) abortedWhileHeld += 1;
      end();
    });
    upstream.on('close', () => {
      if (!holding) end();
    });
    client.on('error', end);
    upstream.on('error', end);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    get held() {
      return held;
    },
    get abortedWhileHeld() {
      return abortedWhileHeld;
    },
    async close() {
      for (const s of sockets) s.destroy();
      server.close();
      await once(server, 'close');
    },
  };
}
