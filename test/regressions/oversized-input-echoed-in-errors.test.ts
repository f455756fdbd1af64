/**
 * Regression (operators' mistakes): an error quoted the value it refused whole, so a
 * 100 KB model name or token-file path (up to the management body limit)
 * came back as a 100 KB message: one line on the operator's terminal and in every log that keeps
 * the CLI's output. Now a message quotes at most QUOTE_MAX characters of it, then `…`.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { QUOTE_MAX } from '../../src/printable.js';
import { type Inproc, MODEL, buildInproc } from '../helpers/inproc.js';

let d: Inproc;
beforeAll(async () => {
  d = await buildInproc();
});
afterAll(async () => {
  await d.close();
});

const huge = 'x'.repeat(100_000);
const shown = `${'x'.repeat(QUOTE_MAX)}…`;

async function message(method: 'GET' | 'POST' | 'DELETE', url: string, body?: unknown): Promise<string> {
  const r = await d.manage(method, url, body);
  expect(r.status).toBeGreaterThanOrEqual(400);
  return (r.json as { error: { message: string } }).error.message;
}

it('an unknown model of 100 KB is quoted to QUOTE_MAX characters', async () => {
  expect(await message('POST', '/v1/instances', { id: 'gpu-1', model: huge })).toBe(
    `Model "${shown}" is not allowed: the allowed models are ${d.config.models.join(', ')}. Allow it first with \`ob-proxy models allow MODEL\`.`,
  );
});

it('a token-file path of 100 KB is quoted to QUOTE_MAX characters', async () => {
  await d.manage('POST', '/v1/instances', { id: 'gpu-2', model: MODEL });
  const m = await message('POST', '/v1/instances/gpu-2/ready', {
    endpoint: 'http://127.0.0.1:9',
    upstreamTokenFile: `/${huge}`,
  });
  expect(m).toContain(`/${'x'.repeat(QUOTE_MAX - 1)}…`);
  expect(m.length).toBeLessThan(400);
});
