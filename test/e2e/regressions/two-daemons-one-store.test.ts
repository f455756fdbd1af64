/**
 * Regression (Two daemons on one home): a second `serve` with its own --socket
 * started on the same db.json. A key revoked through one daemon was still answered 200 by the
 * other, whose next write (its usage flush) put `active` back on disk. Now the store is locked:
 * the second daemon exits non-zero naming the first one's pid, before binding anything; and the
 * lock is the kernel's, so it is free again the moment the holder dies, even by kill -9.
 */
import { access } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { postChat } from '../../helpers/chat.js';
import {
  type ServeProcess,
  type SimProcess,
  runCli,
  startServe,
  startSimulate,
  tmpHome,
} from '../../helpers/processes.js';
import { chat, readyInstance } from '../../helpers/store-home.js';

let sim: SimProcess;
let home: string;
let first: ServeProcess;
beforeAll(async () => {
  sim = await startSimulate(['gemma4:26b']);
  home = await tmpHome();
  first = await startServe(home);
});
afterAll(async () => {
  await first.stop();
  await sim.stop();
});

it("refuses a second daemon on the same store, naming the first one's pid, and binds nothing", async () => {
  const { keyId, secret } = await readyInstance(home, 'gpu-1', sim.url);
  const otherDir = await tmpHome();
  const otherSocket = join(otherDir, 'second.sock');
  const second = await runCli(['serve', '--port', '0', '--socket', otherSocket], {
    home,
    env: { OB_PROXY_USAGE_FLUSH_MS: '50', OB_PROXY_LOG_LEVEL: 'warn' },
  });
  expect(second.code).not.toBe(0);
  expect(second.stderr).toContain(
    `Another ob-proxy daemon (pid ${first.proc.pid}) is already using the store ${join(home, 'db.json')}`,
  );
  expect(second.stdout).toBe('');
  await expect(access(otherSocket)).rejects.toThrow();
  // The first daemon's revocation holds, on its port and on disk.
  expect((await runCli(['keys', 'revoke', keyId], { home })).code).toBe(0);
  expect((await postChat(first.baseUrl, secret, chat())).status).toBe(401);
});

it('is free again right after the holder is killed with SIGKILL', async () => {
  await first.stop('SIGKILL');
  first = await startServe(home);
  expect(first.logs().some((l) => l.msg === 'ob-proxy serving')).toBe(true);
});
