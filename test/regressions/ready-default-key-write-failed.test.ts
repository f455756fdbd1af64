/**
 * Regression: when the background default key could not be written, `instances ready` said
 * "nothing was changed" although the instance had become ready. It now says what is true and
 * how to get a key.
 */
import { homedir } from 'node:os';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startDaemon, type Daemon } from '../../daemon/build-daemon.js';
import { resolveConfig } from '../../src/config-resolve.js';
import { obError } from '../../src/errors.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import type { Mutation } from '../../src/store/store.js';
import { tmpHome } from '../helpers/processes.js';

/** A store that accepts everything but key records. */
class NoKeysStore extends MemoryStore {
  override async commit(mutations: readonly Mutation[]): Promise<void> {
    if (mutations.some((m) => m.op === 'putKey'))
      throw obError('store_write_failed', { message: 'The store could not be written (ENOSPC); nothing was changed.' });
    await super.commit(mutations);
  }
}

let daemon: Daemon;
beforeAll(async () => {
  const home = await tmpHome();
  const { Writable } = await import('node:stream');
  daemon = await startDaemon(resolveConfig({ home, port: 0, logLevel: 'silent' }, {}, homedir()), {
    version: 'test',
    store: new NoKeysStore(),
    logStream: new Writable({ write: (_c, _e, cb) => cb() }),
  });
});
afterAll(async () => {
  await daemon.shutdown(0);
});

it('says the instance is ready and how to make a key when only the default key failed to be written', async () => {
  const add = await daemon.management.inject({
    method: 'POST',
    url: '/v1/instances',
    payload: { id: 'gpu-1', model: 'gemma4:26b', endpoint: 'http://127.0.0.1:9' },
  });
  expect(add.statusCode).toBe(201);
  const ready = await daemon.management.inject({
    method: 'POST',
    url: '/v1/instances/gpu-1/ready',
    payload: { probe: false },
  });
  expect(ready.statusCode).toBe(503);
  expect(ready.json()).toEqual({
    error: {
      code: 'store_write_failed',
      type: 'store_error',
      param: null,
      message: expect.stringMatching(
        /^Instance gpu-1 is ready, but its default key could not be written \(.*ENOSPC.*\) Once the store is writable, create one with `ob-proxy keys create --instance gpu-1 --name default`\.$/,
      ),
    },
  });
  const shown = await daemon.management.inject({ method: 'GET', url: '/v1/instances/gpu-1' });
  expect(shown.json()).toMatchObject({ state: 'ready', activeKeys: 0 });
});
