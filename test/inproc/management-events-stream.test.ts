/**
 * Regression (management plane, bounds): GET /v1/events wrote every event whatever the reader
 * took, so a reader that stopped reading (a console suspended with Ctrl-Z, a script that opened
 * the stream and never read it) had every later event held in the daemon's memory, without
 * bound and for as long as it stayed connected: here a stop of an instance with 5,000 keys
 * (names of 4,000 characters, as a hand-edited store may hold) held 20 MB for it. Now a reader
 * that leaves more than MAX_UNREAD_EVENT_BYTES unread is disconnected, with a line in the log;
 * the console reads the whole state again when it reconnects.
 */
import { createHash } from 'node:crypto';
import { connect } from 'node:net';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { MAX_UNREAD_EVENT_BYTES } from '../../daemon/management/events.js';
import { type InprocCli, inprocCli } from '../helpers/inproc-cli.js';
import { eventually, tmpHome } from '../helpers/processes.js';
import { type Harness, startHarness } from '../reliability/harness.js';

const KEYS = 5_000;
const NAME = 'n'.repeat(4_000);
const AT = '2026-11-23T10:00:00.000Z';

const STORE = {
  version: 2,
  instances: [
    {
      id: 'gpu-1',
      deployment: 'dep-1',
      model: 'gemma4:26b',
      endpoint: 'http://127.0.0.1:9',
      state: 'ready',
      packEndsAt: null,
      createdAt: AT,
      updatedAt: AT,
    },
  ],
  keys: Array.from({ length: KEYS }, (_, i) => ({
    id: `key${String(i).padStart(9, '0')}`,
    name: `${NAME}${i}`,
    instance: 'gpu-1',
    deployment: 'dep-1',
    hash: createHash('sha256').update(String(i)).digest('hex'),
    hint: 'ob_sk_…AAAA',
    isDefault: false,
    status: 'active',
    createdAt: AT,
    lastUsedAt: null,
    revokedAt: null,
    revokeReason: null,
    usage: { requests: 0, promptTokens: 0, completionTokens: 0 },
  })),
  events: [],
};

let d: Harness;
let cli: InprocCli;
beforeAll(async () => {
  const home = await tmpHome();
  await writeFile(join(home, 'db.json'), JSON.stringify(STORE), { mode: 0o600 });
  d = await startHarness({}, { home });
  cli = inprocCli(d.daemon.management);
}, 60_000);
afterAll(async () => {
  await d?.stop();
});

it('a reader that does not read is disconnected once it leaves too much unread', async () => {
  // The events of the stop exceed the bound, so the test shows it, not the kernel's buffers.
  expect(KEYS * NAME.length).toBeGreaterThan(MAX_UNREAD_EVENT_BYTES);
  const socket = connect(d.config.socket);
  let received = '';
  let closed = false;
  socket.setEncoding('utf8');
  socket.on('close', () => (closed = true));
  // Dropped with events unread, the connection may end with a reset: that is the drop.
  socket.on('error', () => {});
  socket.write('GET /v1/events HTTP/1.1\r\nhost: x\r\n\r\n');
  // Subscribed once the stream's opening comment came; then it reads nothing more.
  await new Promise<void>((resolve) =>
    socket.on('data', (chunk: string) => {
      received += chunk;
      if (received.includes(': ob-proxy events')) {
        socket.pause();
        resolve();
      }
    }),
  );

  const stop = await cli.run('instances', 'stop', 'gpu-1', '--yes');
  expect(stop.code).toBe(0);
  await eventually(
    () => d.rawLogs.some((l) => l.includes('event stream reader is not reading: disconnected')),
    'the daemon to drop the reader',
    30_000,
  );

  // The connection ends, without every event of the stop.
  socket.resume();
  await eventually(() => closed, 'the stream to end', 30_000);
  expect(received.split('\n').filter((l) => l.startsWith('data: ')).length).toBeLessThan(KEYS);

  // The stop itself went through: every key revoked.
  const gpu = await cli.json<{ state: string; activeKeys: number }>('instances', 'show', 'gpu-1');
  expect(gpu).toMatchObject({ state: 'stopped', activeKeys: 0 });
}, 120_000);
