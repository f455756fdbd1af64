/**
 * A Responses WebSocket client for tests, on the `ws` package (Node's own WebSocket sends no
 * Authorization header): every message kept in order, the close code and reason, and the HTTP
 * answer of a refused upgrade (status, headers, body).
 */
import { WebSocket } from 'ws';

export type Event = Record<string, unknown> & { type: string };

export interface Refused {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
}

export class SocketClient {
  readonly events: Event[] = [];
  /** The handshake's answer headers (the 101's). */
  headers: Record<string, string | string[] | undefined> = {};
  readonly closed: Promise<{ code: number; reason: string }>;
  private waiters: (() => void)[] = [];

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => {
      this.events.push(JSON.parse(String(data)) as Event);
      for (const w of this.waiters.splice(0)) w();
    });
    this.closed = new Promise((resolve) => {
      ws.on('close', (code, reason) => {
        resolve({ code, reason: String(reason) });
        for (const w of this.waiters.splice(0)) w();
      });
    });
  }

  /** Opens `<base>/v1/responses` as a WebSocket with `key` as its Bearer; rejects with the refusal. */
  static open(base: string, key: string | null, headers: Record<string, string> = {}): Promise<SocketClient> {
    const url = `${base.replace(/^http/, 'ws')}/v1/responses`;
    const ws = new WebSocket(url, {
      headers: key === null ? headers : { authorization: `Bearer ${key}`, ...headers },
      perMessageDeflate: false,
    });
    const client = new SocketClient(ws);
    return new Promise((resolve, reject) => {
      ws.once('upgrade', (res) => {
        client.headers = res.headers;
      });
      ws.once('open', () => resolve(client));
      ws.once('unexpected-response', (_req, res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (s: string) => (text += s));
        res.on('end', () => {
          let body: unknown = text;
          try {
            body = JSON.parse(text);
          } catch {
            // not JSON: kept as text
          }
          reject(
            Object.assign(new Error(`upgrade refused: ${res.statusCode}`), {
              refused: { status: res.statusCode ?? 0, headers: res.headers, body } satisfies Refused,
            }),
          );
        });
      });
      ws.once('error', reject);
    });
  }

  send(event: unknown): void {
    this.ws.send(typeof event === 'string' ? event : JSON.stringify(event));
  }

  /** Resolves once `pred` holds for the events received so far, or the socket is closed. */
  async until(pred: (events: Event[]) => boolean): Promise<Event[]> {
    for (let i = 0; i < 10_000; i++) {
      if (pred(this.events) || this.ws.readyState === WebSocket.CLOSED) return this.events;
      await new Promise<void>((r) => this.waiters.push(r));
    }
    throw new Error('too many messages');
  }

  /** The events from index `from` up to and including the next one whose type is in `types`. */
  async next(from: number, ...types: string[]): Promise<Event[]> {
    const ends = types.length === 0 ? ['response.completed', 'response.failed', 'response.incomplete', 'error'] : types;
    const done = (es: Event[]): boolean => es.slice(from).some((e) => ends.includes(e.type));
    await this.until(done);
    const rest = this.events.slice(from);
    const at = rest.findIndex((e) => ends.includes(e.type));
    return at === -1 ? rest : rest.slice(0, at + 1);
  }

  /** One `response.create` and its events, up to its terminal one. */
  async create(body: Record<string, unknown>): Promise<Event[]> {
    const from = this.events.length;
    this.send({ type: 'response.create', ...body });
    return this.next(from);
  }

  close(): void {
    this.ws.close();
  }
}

/** The refusal an `open` rejected with. */
export async function refusedUpgrade(p: Promise<SocketClient>): Promise<Refused> {
  try {
    await p;
  } catch (err) {
    const r = (err as { refused?: Refused }).refused;
    if (r !== undefined) return r;
    throw err;
  }
  throw new Error('the upgrade was not refused');
}

/** The response object of a terminal event. */
export function responseIn(events: Event[]): Record<string, unknown> {
  const last = events[events.length - 1] as Event;
  return last.response as Record<string, unknown>;
}
