/**
 * Regression (Signals): `serve` installed its SIGTERM handler only after it had printed
 * "ob-proxy serving". A supervisor that stopped the daemon at once, or any signal while the store
 * was opening, met Node's default action: the process died by the signal, with no drain and no
 * final store write. A signal during start-up is now held and acted on once the daemon is up.
 *
 * The daemon is held mid-start (OB_PROXY_TEST_START_GATE: handlers in, store not opened) until
 * the signal has been sent, so the signal lands while it starts however fast or slow the machine.
 */
import { spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { BIN, NODE, eventually, tmpHome } from '../../helpers/processes.js';

it('SIGTERM while the daemon is still starting stops it cleanly once it is up', async () => {
  const home = await tmpHome();
  const gate = join(home, 'start-gate');
  const proc = spawn(NODE, [BIN, 'serve', '--port', '0', '--home', home], {
    env: { ...process.env, NO_COLOR: '1', OB_PROXY_TEST_START_GATE: gate },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  let buffered = '';
  proc.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    buffered += chunk;
    const parts = buffered.split('\n');
    buffered = parts.pop() ?? '';
    lines.push(...parts);
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) =>
    proc.on('close', (code, signal) => done({ code, signal })),
  );
  await eventually(() => lines.some((l) => l.includes('start-up held')), 'the daemon held mid-start', 15_000);
  proc.kill('SIGTERM');
  await writeFile(gate, '');
  expect(await exited).toEqual({ code: 0, signal: null });
  const messages = lines
    .map((l) => (JSON.parse(l) as { msg: string }).msg)
    .filter((m) => !m.startsWith('Server listening at '));
  expect(messages).toEqual([
    'start-up held until the gate file exists',
    'ob-proxy serving',
    'signal received while starting',
    'draining: no new requests, in-flight ones may finish',
    'stopped',
  ]);
}, 30_000);
