/**
 * What bench/ops-counters.mjs, ops-instructions.mjs and alloc-sites.mjs share: the daemon variants
 * they compare (options for bench/targets.mjs's startObProxy) and the client that drives them.
 */
import { Agent, request } from 'node:http';

/** Metrics and per-key limits apart and together; `concurrency` is a key with only that limit. */
export const VARIANTS = {
  plain: {},
  metrics: { metrics: true },
  limits: { limits: true },
  concurrency: { limits: 'concurrency' },
  ops: { metrics: true, limits: true },
};

/** `n` requests of `body`, `c` at a time, each read to its end; throws unless every one is a 200. */
export async function send(url, headers, body, n, c) {
  const agent = new Agent({ keepAlive: true, maxSockets: c, maxFreeSockets: c });
  const h = { ...headers, 'content-type': 'application/json', 'content-length': String(body.length) };
  let left = n;
  let bad = 0;
  const one = () =>
    new Promise((done, fail) => {
      const req = request(`${url}/v1/chat/completions`, { method: 'POST', agent, headers: h }, (res) => {
        if (res.statusCode !== 200) bad++;
        res.resume();
        res.on('end', done);
        res.on('error', fail);
      });
      req.on('error', fail);
      req.end(body);
    });
  await Promise.all(
    Array.from({ length: c }, async () => {
      while (left > 0) {
        left--;
        await one();
      }
    }),
  );
  agent.destroy();
  if (bad > 0) throw new Error(`${bad} of ${n} requests were not answered 200`);
}
