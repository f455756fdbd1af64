/* global process, Buffer */
/**
 * What refusing repeated and case-variant keys costs per request body, against the two other
 * choices issue 10 names, measured in one process with interleaved repetitions:
 *   parse      JSON.parse alone (what the proxy did before: it checked nothing of the kind)
 *   check      parseChatBody: UTF-8 check, JSON.parse, member count, field-name folds (ours)
 *   canonical  JSON.parse + JSON.stringify (forward a re-serialised copy instead; it would still
 *              need the case-fold check, so it is a lower bound for that design)
 * Prints µs per body (median of reps) and the ratios to `parse`. Run after `npm run build`:
 *   node bench/json-keys.mjs [--reps 15]
 */
import { parseArgs } from 'node:util';
import { parseChatBody } from '../dist/src/wire/chat-request.js';
import { bodies } from './scenarios.mjs';

const { values: a } = parseArgs({ options: { reps: { type: 'string' } } });
const reps = Number(a.reps ?? 15);
const MODEL = 'gemma4:26b';
const b = bodies();
const tool = (i) => ({
  type: 'function',
  function: {
    name: `tool_${i}`,
    description: 'Looks something up.',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string' }, days: { type: 'integer', minimum: 1 }, units: { enum: ['c', 'f'] } },
      required: ['city'],
    },
  },
});
const cases = {
  'plain (SDK hello, 77 B)': b.plain,
  'agent (10 tools, 6 turns)': JSON.stringify({
    model: MODEL,
    stream: true,
    tools: Array.from({ length: 10 }, (_, i) => tool(i)),
    messages: Array.from({ length: 6 }, (_, i) => ({
      role: i % 2 === 0 ? 'user' : 'assistant',
      content: `turn ${i} `.repeat(20),
    })),
  }),
  'large (200 KB of turns)': b.large,
  'image (1 MiB base64 part)': JSON.stringify({
    model: MODEL,
    messages: [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'What is this?' },
          {
            type: 'image_url',
            image_url: { url: `data:image/png;base64,${Buffer.alloc(768 * 1024, 7).toString('base64')}` },
          },
        ],
      },
    ],
  }),
};

const variants = {
  parse: (raw) => JSON.parse(raw.toString('utf8')),
  check: (raw) => parseChatBody(raw),
  canonical: (raw) => JSON.stringify(JSON.parse(raw.toString('utf8'))),
};

function timeUs(fn, raw) {
  // Enough iterations for ~20 ms per measurement.
  let n = 1;
  for (;;) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < n; i++) fn(raw);
    const ns = Number(process.hrtime.bigint() - t0);
    if (ns > 20e6) return ns / n / 1000;
    n *= 2;
  }
}

const median = (xs) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];
const rows = [];
for (const [name, text] of Object.entries(cases)) {
  const raw = Buffer.from(text);
  const samples = { parse: [], check: [], canonical: [] };
  for (const fn of Object.values(variants)) timeUs(fn, raw); // warm-up
  for (let r = 0; r < reps; r++) for (const [v, fn] of Object.entries(variants)) samples[v].push(timeUs(fn, raw));
  // Ratios as medians of per-repetition pairs: the machine's speed drifts within a run.
  const ratio = (v) => median(samples[v].map((x, i) => x / samples.parse[i]));
  rows.push(
    `| ${name} | ${raw.length} | ${median(samples.parse).toFixed(2)} | ${median(samples.check).toFixed(2)} (${ratio('check').toFixed(2)}×) | ${median(samples.canonical).toFixed(2)} (${ratio('canonical').toFixed(2)}×) |`,
  );
}
process.stdout.write(
  [
    '| body | bytes | parse µs | check µs (× parse) | canonical µs (× parse) |',
    '|---|---|---|---|---|',
    ...rows,
    '',
  ].join('\n'),
);
