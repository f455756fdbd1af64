import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable, pipeline } from 'node:stream';
import type { Metrics } from './metrics.js';

/**
 * `GET /metrics` in Prometheus' text format, on a listener of its own: never on the public port,
 * where anyone with the address could read every instance's traffic.
 */
export async function listenMetrics(
  metrics: Metrics,
  host: string,
  port: number,
): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' || path !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' });
      res.end('Not found: scrape GET /metrics.\n');
      return;
    }
    // Written a piece at a time as it is made (Metrics.scrapePieces): a failure before the first
    // piece is a 500; one after it can only cut the answer short, which Prometheus counts a failed
    // scrape.
    const pieces = metrics.scrapePieces();
    pieces.next().then(
      (first) => {
        res.writeHead(200, { 'content-type': metrics.registry.contentType });
        if (first.done === true) {
          res.end();
          return;
        }
        res.write(first.value);
        pipeline(Readable.from(pieces, { objectMode: false }), res, () => {});
      },
      (err: unknown) => {
        res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' });
        res.end(`metrics failed: ${(err as Error).message}\n`);
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const addr = server.address() as AddressInfo;
  const h = host.includes(':') ? `[${host}]` : host;
  return {
    url: `http://${h}:${addr.port}/metrics`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
