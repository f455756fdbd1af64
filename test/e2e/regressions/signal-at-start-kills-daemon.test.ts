/**
 * Regression (Signals): `serve` installed its SIGTERM handler only after it had printed
 * "ob-proxy serving". A supervisor that stopped the daemon at once, or any signal while the store
 * was opening, met Node's default action: the process died by the signal, with no drain and no
 * final store write. A signal during start-up is now held and acted on once the daemon is up.
 */
import { spawn } from 'node:child_process';
import { chmod } from 'node:fs/promises';
import { expect, it } from 'vitest';
import { BIN, NODE, tmpHome } from '../../helpers/processes.js';

it('SIGTERM while the daemon is still starting stops it cleanly once it is up', async () => {
  const home = await tmpHome();
  // A loose home is tightened at start with a warning: a line printed mid-start-up, before the
  // store is opened or a port bound, so the signal lands while the daemon is starting.
  await chmod(home, 0o755);
  const proc = spawn(NODE, [BIN, 'serve', '--port', '0', '--home', home], {
    env: { ...process.env, NO_COLOR: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  let buffered = '';
  proc.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    buffered += chunk;
    const parts = buffered.split('\n');
    buffered = parts.pop() ?? '';
    for (const line of parts) {
      lines.push(line);
      if (line.includes('readable by other users')) proc.kill('SIGTERM');
    }
  });
  const exit = await new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) =>
    proc.on('exit', (code, signal) => done({ code, signal })),
  );
  expect(exit).toEqual({ code: 0, signal: null });
  const messages = lines
    .map((l) => (JSON.parse(l) as { msg: string }).msg)
    .filter((m) => !m.startsWith('Server listening at '));
  expect(messages).toEqual([
    'the home folder was mode 0755, readable by other users: made it 0700',
    'ob-proxy serving',
    'signal received while starting',
    'draining: no new requests, in-flight ones may finish',
    'stopped',
  ]);
}, 20_000);
