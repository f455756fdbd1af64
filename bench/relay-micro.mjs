/* global process, URL, Buffer, console */
// The relay alone: ns per event over 66-event streams, one event per read ('whole'), a third
// of the events cut across two reads ('split'), and half the tokens reasoning deltas ('reasoning').
// Usage: npm run build && node bench/relay-micro.mjs [checkout] [--slow]
// (another built checkout, to compare two builds interleaved; `--slow`: the relay with its fast
// paths off, OB_PROXY_RELAY_FAST_PATH=0, builds from issue 11 on).
const slow = process.argv.includes('--slow');
const dir =
  process.argv.slice(2).find((a) => !a.startsWith('--')) ?? new URL('..', import.meta.url).pathname.replace(/\/$/, '');
const { SseRelay } = await import(`${dir}/dist/src/wire/sse-relay.js`);
const { OutputBatch } = await import(`${dir}/dist/src/wire/output-batch.js`);
// The learned layouts' module and class, by their name in that build (before issue 11: frame-shapes).
const Layouts = await import(`${dir}/dist/src/wire/event-layouts.js`).then(
  (m) => m.EventLayouts,
  () => import(`${dir}/dist/src/wire/frame-shapes.js`).then((m) => m.FrameShapes),
);
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
// A thinking model's stream (qwen3.6): half of its 64 tokens are reasoning deltas.
const think = (evs) =>
  evs.map((e, i) => (i < 32 ? Buffer.from(e.toString().replace('"delta":{"content":"', '"delta":{"reasoning":"')) : e));
// Splits some events across reads too (a third of them cut in two).
const split = streams.map((evs) => evs.flatMap((e, i) => (i % 3 === 0 ? [e.subarray(0, 40), e.subarray(40)] : [e])));
const shapes = slow ? null : new Layouts();
function run(n, input) {
  let bytes = 0;
  for (let k = 0; k < n; k++) {
    const relay = new SseRelay('chatcmpl-ours', false, shapes);
    const out = new OutputBatch();
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
  ['reasoning', streams.map(think)],
]) {
  run(2000, input);
  const times = [];
  for (let r = 0; r < 7; r++) {
    const t = process.hrtime.bigint();
    run(20000, input);
    times.push(Number(process.hrtime.bigint() - t) / 20000 / 66);
  }
  times.sort((a, b) => a - b);
  console.log(name, 'ns/event median', times[3].toFixed(1), 'min', times[0].toFixed(1));
}
