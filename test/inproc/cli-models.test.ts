/**
 * `ob-proxy models` in process (`runCli` over inject): the list as a person reads it and as
 * --json prints it, a third model allowed while the daemon runs becoming an instance that
 * answers through the simulator, `instances add` and `ready` saying when the model server does
 * not list the model, each refusal's line and exit code, and the audit line.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Simulator } from '../../simulator/simulator.js';
import { ok, refused } from '../helpers/cli-outcome.js';
import { type Inproc, buildInproc, chatRequests, startSim } from '../helpers/inproc.js';
import { type InprocCli, inprocCli } from '../helpers/inproc-cli.js';

const LLAMA = 'llama3.1:8b';
const START =
  "This daemon's list from its start (OB_PROXY_MODELS, or the default ids): the first `ob-proxy models allow` or `disallow` writes it to the store, for every daemon of it.\n";
const STORED =
  'The list is in the store: every daemon of the store allows these. Change it with `ob-proxy models allow` or `disallow`.\n';

let d: Inproc;
let cli: InprocCli;
let llama: { sim: Simulator; url: string };
let gemma: { sim: Simulator; url: string };

beforeAll(async () => {
  d = await buildInproc();
  cli = inprocCli(d.daemon.management);
  llama = await startSim({ models: [LLAMA] });
  gemma = await startSim();
});

afterAll(async () => {
  await d?.close();
  await llama?.sim.close();
  await gemma?.sim.close();
});

describe('models', () => {
  it('lists the default ids, allows a third while the daemon runs, which then serves', async () => {
    expect(await cli.run('models', 'list')).toEqual(
      ok(['MODEL        INSTANCES', 'gemma4:26b   -', 'qwen3.6:27b  -', ''].join('\n') + START),
    );
    expect(await cli.run('instances', 'add', 'llama-1', '--model', LLAMA)).toEqual(
      refused(
        1,
        'Model "llama3.1:8b" is not allowed: the allowed models are gemma4:26b, qwen3.6:27b. Allow it first with `ob-proxy models allow llama3.1:8b`.',
      ),
    );
    expect(await cli.run('models', 'allow', LLAMA)).toEqual(
      ok('Allowed models: gemma4:26b, qwen3.6:27b, llama3.1:8b.\n'),
    );
    expect(await cli.run('instances', 'add', 'llama-1', '--model', LLAMA, '--endpoint', llama.url)).toEqual(
      ok(
        'Added instance llama-1 (llama3.1:8b), state pending. Make it ready with `ob-proxy instances ready llama-1`.\n',
      ),
    );
    const ready = await cli.json<{ defaultKey: { secret: string } }>('instances', 'ready', 'llama-1');
    const answer = await d.chat(ready.defaultKey.secret, { model: LLAMA, messages: [{ role: 'user', content: 'hi' }] });
    expect([answer.status, (answer.json as { model: string }).model]).toEqual([200, LLAMA]);
    expect(chatRequests(llama.sim).map((r) => (r.body as { model: string }).model)).toEqual([LLAMA]);
    expect(await cli.run('models', 'list')).toEqual(
      ok(
        ['MODEL        INSTANCES', 'gemma4:26b   -', 'qwen3.6:27b  -', 'llama3.1:8b  llama-1', ''].join('\n') + STORED,
      ),
    );
    expect(await cli.json('models', 'list')).toEqual({
      models: [
        { id: 'gemma4:26b', instances: [] },
        { id: 'qwen3.6:27b', instances: [] },
        { id: LLAMA, instances: ['llama-1'] },
      ],
      source: 'store',
    });
    // `status` names the list the daemon allows now.
    expect((await cli.json<{ models: string[] }>('status')).models).toEqual(['gemma4:26b', 'qwen3.6:27b', LLAMA]);
    expect(d.logs.filter((l) => l.audit === 'models.changed')).toMatchObject([
      { msg: 'audit', instance: '', models: ['gemma4:26b', 'qwen3.6:27b', LLAMA] },
    ]);
  });

  it('disallows, but not a model an instance that is not terminated runs', async () => {
    expect(await cli.run('models', 'disallow', LLAMA)).toEqual(
      refused(
        1,
        'llama3.1:8b cannot be disallowed: instance llama-1 runs it. Terminate or remove it first (`ob-proxy instances terminate ID`). Nothing was changed.',
      ),
    );
    expect(await cli.json('models', 'disallow', 'qwen3.6:27b')).toEqual({
      models: [
        { id: 'gemma4:26b', instances: [] },
        { id: LLAMA, instances: ['llama-1'] },
      ],
      source: 'store',
    });
    expect(await cli.run('models', 'allow', 'not a model')).toEqual(
      refused(
        1,
        '"not a model" is not a model id: 1-200 characters: letters, digits, and . _ : / @ + - (not first). Give the id as the model server lists it, e.g. llama3.1:8b.',
      ),
    );
    expect(await cli.run('models', 'allow')).toEqual(refused(2, "missing required argument 'model'"));
  });

  it('instances add and ready say when the model server does not list the model', async () => {
    const added = await cli.run('instances', 'add', 'gpu-9', '--model', 'gemma4:26b', '--endpoint', llama.url);
    expect(added).toEqual(
      ok(
        'Added instance gpu-9 (gemma4:26b), state pending. Make it ready with `ob-proxy instances ready gpu-9`.\n' +
          `Note: GET ${llama.url}/v1/models: model gemma4:26b is not served (it serves: llama3.1:8b). \`instances ready\` refuses until it does: pull or load the model there, or check the id.\n`,
      ),
    );
    expect(await cli.run('instances', 'ready', 'gpu-9')).toEqual(
      refused(
        1,
        `Instance gpu-9 was not made ready: GET ${llama.url}/v1/models: model gemma4:26b is not served (it serves: llama3.1:8b). Pull or load the model on the model server, or skip this check with --no-probe.`,
      ),
    );
    // Served: nothing more is said, and --json has no such field.
    const view = await cli.json<Record<string, unknown>>(
      'instances',
      'add',
      'gpu-8',
      '--model',
      'gemma4:26b',
      '--endpoint',
      gemma.url,
    );
    expect(view).not.toHaveProperty('modelNotServed');
    const missing = await cli.json<Record<string, unknown>>(
      'instances',
      'add',
      'gpu-7',
      '--model',
      'gemma4:26b',
      '--endpoint',
      llama.url,
    );
    expect(missing.modelNotServed).toBe(
      `GET ${llama.url}/v1/models: model gemma4:26b is not served (it serves: llama3.1:8b)`,
    );
  });
});
