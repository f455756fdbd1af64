/**
 * A test OpenTelemetry collector: an HTTP server on 127.0.0.1:0 that takes OTLP/HTTP trace
 * exports as the exporter sends them (JSON, `POST /v1/traces`), keeps the raw bytes (to search
 * for what must never be there) and decodes the spans, attributes flattened to plain values.
 * `failWith` makes it refuse exports, as a collector that is down or overloaded does.
 */
import { type Server, createServer } from 'node:http';
import { gunzipSync } from 'node:zlib';

interface AnyValue {
  stringValue?: string;
  intValue?: number | string;
  doubleValue?: number;
  boolValue?: boolean;
  arrayValue?: { values?: AnyValue[] };
}

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  /** OTLP status: 0 unset, 1 ok, 2 error. */
  status: { code: number; message: string };
  startNs: bigint;
  endNs: bigint;
  attributes: Record<string, unknown>;
  resource: Record<string, unknown>;
}

export interface OtlpReceiver {
  url: string;
  spans: ReceivedSpan[];
  /** Every export body as it arrived (decompressed). */
  raw: Buffer[];
  paths: string[];
  contentTypes: string[];
  /** An HTTP status to answer exports with instead of 200 (null: take them). */
  failWith: number | null;
  /** Resolves once `n` spans have arrived. */
  waitFor(n: number): Promise<ReceivedSpan[]>;
  close(): Promise<void>;
}

function value(v: AnyValue): unknown {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.arrayValue !== undefined) return (v.arrayValue.values ?? []).map(value);
  return null;
}

function attributes(list: { key: string; value: AnyValue }[] | undefined): Record<string, unknown> {
  return Object.fromEntries((list ?? []).map((a) => [a.key, value(a.value)]));
}

interface ExportBody {
  resourceSpans?: {
    resource?: { attributes?: { key: string; value: AnyValue }[] };
    scopeSpans?: {
      spans?: {
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        name: string;
        kind: number;
        status?: { code?: number; message?: string };
        startTimeUnixNano: string | number;
        endTimeUnixNano: string | number;
        attributes?: { key: string; value: AnyValue }[];
      }[];
    }[];
  }[];
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const waiters: { n: number; done: () => void }[] = [];
  const r: OtlpReceiver = {
    url: '',
    spans: [],
    raw: [],
    paths: [],
    contentTypes: [],
    failWith: null,
    waitFor: (n) =>
      new Promise((done) => {
        if (r.spans.length >= n) done(r.spans);
        else waiters.push({ n, done: () => done(r.spans) });
      }),
    close: () => new Promise((done) => server.close(() => done())),
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (r.failWith !== null) {
        res.writeHead(r.failWith).end();
        return;
      }
      let body = Buffer.concat(chunks);
      if (req.headers['content-encoding'] === 'gzip') body = gunzipSync(body);
      r.raw.push(body);
      r.paths.push(req.url ?? '');
      r.contentTypes.push(String(req.headers['content-type']));
      const parsed = JSON.parse(body.toString('utf8')) as ExportBody;
      for (const rs of parsed.resourceSpans ?? []) {
        const resource = attributes(rs.resource?.attributes);
        for (const ss of rs.scopeSpans ?? [])
          for (const s of ss.spans ?? [])
            r.spans.push({
              traceId: s.traceId,
              spanId: s.spanId,
              parentSpanId: s.parentSpanId ?? '',
              name: s.name,
              kind: s.kind,
              status: { code: s.status?.code ?? 0, message: s.status?.message ?? '' },
              startNs: BigInt(s.startTimeUnixNano),
              endNs: BigInt(s.endTimeUnixNano),
              attributes: attributes(s.attributes),
              resource,
            });
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      for (const w of waiters.splice(0)) {
        if (r.spans.length >= w.n) w.done();
        else waiters.push(w);
      }
    });
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const addr = server.address() as { port: number };
  r.url = `http://127.0.0.1:${addr.port}`;
  return r;
}
