/* global process, Buffer, console */
// Two built checkouts' relays in one process, on relay-micro.mjs's plain streams, alternated in
// short rounds (each round in the other order), so the machine's drift hits both alike: prints
// each build's median ns per event and the median of the per-round ratios (first / second).
// Usage: npm run build && node bench/relay-ab.mjs <checkout A> <checkout B>
const dirs = process.argv.slice(2);
const builds = [];
for (const dir of dirs) {
  const { SseRelay } = await import(`${dir}/dist/src/wire/sse-relay.js`);
  const { OutputBatch } = await import(`${dir}/dist/src/wire/output-batch.js`);
  const Layouts = await import(`${dir}/dist/src/wire/event-layouts.js`).then(
    (m) => m.EventLayouts,
    () => import(`${dir}/dist/src/wire/frame-shapes.js`).then((m) => m.FrameShapes),
  );
  builds.push({ dir, SseRelay, OutputBatch, shapes: new Layouts() });
}
const head = (id) =>
  `data: {"id":"chatcmpl-${id}","object":"chat.completion.chunk","created":1763870000,"model":"gemma4:26b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"content":"`;
const mk = (id) => {
  const evs = [];
  for (let i = 0; i < 64; i++) evs.push(Buffer.from(`${head(id)}t${i} "},"finish_reason":null}]}\n\n`));
  evs.push(
    Buffer.from(
      `data: {"id":"chatcmpl-${id}","object":"chat.completion.chunk","created":1763870000,"model":"gemma4:26b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n`,
    ),
  );
  evs.push(Buffer.from('data: [DONE]\n\n'));
  return evs;
};
const streams = [mk(1), mk(2), mk(3)];
const split = streams.map((evs) => evs.flatMap((e, i) => (i % 3 === 0 ? [e.subarray(0, 40), e.subarray(40)] : [e])));
function run(b, n, input) {
  let bytes = 0;
  for (let k = 0; k < n; k++) {
    const relay = new b.SseRelay('chatcmpl-ours', false, b.shapes);
    const out = new b.OutputBatch();
    for (const e of input[k % 3]) {
      relay.pushInto(e, out);
      if (out.length > 0) bytes += out.take().length;
    }
  }
  return bytes;
}
for (const [name, input] of [
  ['whole', streams],
  ['split', split],
]) {
  for (const b of builds) run(b, 3000, input);
  const per = builds.map(() => []);
  for (let r = 0; r < 60; r++) {
    // Each round in the other order: neither build always runs after the other.
    for (const i of r % 2 === 0 ? [0, 1] : [1, 0]) {
      const b = builds[i];
      const t = process.hrtime.bigint();
      run(b, 1000, input);
      per[i].push(Number(process.hrtime.bigint() - t) / 1000 / 66);
    }
  }
  const med = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];
  const ratios = per[0].map((t, i) => t / per[1][i]);
  console.log(
    name,
    builds.map((b, i) => `${b.dir.split('/').pop()} ${med(per[i]).toFixed(1)}`).join('  '),
    'ratio median',
    med(ratios).toFixed(3),
    'ratio range',
    Math.min(...ratios).toFixed(2),
    Math.max(...ratios).toFixed(2),
  );
}
