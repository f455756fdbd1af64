/* global process, console, Buffer */
/**
 * `node bench/otlp-sink.mjs [--port 4318]`: a collector that takes OTLP/HTTP trace exports and
 * throws them away, counting the spans, for measuring what tracing costs the daemon
 * (`node bench/callgrind.mjs --env OB_PROXY_OTLP_ENDPOINT=http://127.0.0.1:4318`). Prints the
 * spans received on SIGINT or SIGTERM.
 */
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: { port: { type: 'string' } } });
let spans = 0;
let exports = 0;
const server = createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    exports++;
    // A span's id appears once per span in the JSON encoding.
    spans += Buffer.concat(chunks).toString('utf8').split('"spanId"').length - 1;
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });
});
server.listen(Number(values.port ?? 4318), '127.0.0.1', () => {
  console.log(`OTLP sink on http://127.0.0.1:${server.address().port}`);
});
for (const signal of ['SIGINT', 'SIGTERM'])
  process.on(signal, () => {
    console.log(JSON.stringify({ exports, spans }));
    process.exit(0);
  });
