/**
 * Admin commands that cannot hurt, through the real CLI: confirmation on a terminal
 * (a pseudo-terminal made by `script`), none off one; `keys create -q` in a shell. Each question's
 * wording is in test/inproc/cli-confirmation.test.ts; usage errors naming the flag and `--pack-ends`
 * durations are in test/inproc/cli-errors.test.ts.
 */
import { execFile, spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, NODE, type ServeProcess, type SimProcess, cliJson, eventually, runCli } from '../helpers/processes.js';
import { startDaemonAndSim } from '../helpers/daemon-and-sim.js';

const MODEL = 'gemma4:26b';
const SECRET = /ob_sk_[0-9A-Za-z]{12}_[0-9A-Za-z]{38}/;

interface InstanceJson {
  id: string;
  state: string;
  activeKeys: number;
  packEndsAt: string | null;
}
interface KeyJson {
  id: string;
  name: string;
  hint: string;
  status: string;
  secret?: string;
}

let home: string;
let serve: ServeProcess;
let sim: SimProcess;

beforeAll(async () => {
  ({ home, sim, serve } = await startDaemonAndSim({ instances: [] }));
});

afterAll(async () => {
  await serve?.stop();
  await sim?.stop();
});

/** Adds an instance, makes it ready (one default key), and adds `extra` named keys. */
async function readyInstance(id: string, extra = 0): Promise<KeyJson[]> {
  await cliJson(['instances', 'add', id, '--model', MODEL, '--endpoint', sim.url], home);
  await cliJson(['instances', 'ready', id], home);
  const keys: KeyJson[] = [];
  for (let n = 0; n < extra; n++)
    keys.push(await cliJson<KeyJson>(['keys', 'create', '--instance', id, '--name', `key-${n}`], home));
  return keys;
}

/**
 * Runs `ob-proxy <args>` on a pseudo-terminal; once the screen shows `prompt`, types `answer`.
 * Resolves with the exit code and everything the terminal showed.
 */
function onTerminal(
  args: string[],
  prompt: string | null,
  answer: string,
): Promise<{ code: number | null; screen: string }> {
  const command = [NODE, BIN, ...args, '--home', home].map((a) => `'${a}'`).join(' ');
  const proc = spawn('script', ['-qec', command, '/dev/null'], {
    env: { ...process.env, NO_COLOR: '1' },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let screen = '';
  let answered = false;
  proc.stdout.setEncoding('utf8').on('data', (s: string) => {
    screen += s;
    if (!answered && prompt !== null && screen.includes(prompt)) {
      answered = true;
      proc.stdin.write(`${answer}\n`);
    }
  });
  proc.stderr.setEncoding('utf8').on('data', (s: string) => {
    screen += s;
  });
  return new Promise((resolve) =>
    proc.once('exit', (code) => {
      proc.stdin.end();
      resolve({ code, screen });
    }),
  );
}

async function state(id: string): Promise<InstanceJson> {
  return cliJson<InstanceJson>(['instances', 'show', id], home);
}

describe('confirmation before something dies', () => {
  it('stop on a terminal names the instance and its active keys; "n" changes nothing, "y" stops it', async () => {
    await readyInstance('conf-stop', 2);
    const prompt = 'Stop instance conf-stop (gemma4:26b) and revoke its 3 active keys for ever? [y/N]';
    const no = await onTerminal(['instances', 'stop', 'conf-stop'], prompt, 'n');
    expect(no.screen).toContain(prompt);
    expect(no.screen).toContain('Not confirmed: nothing was changed');
    expect(no.code).toBe(1);
    expect(await state('conf-stop')).toMatchObject({ state: 'ready', activeKeys: 3 });

    const yes = await onTerminal(['instances', 'stop', 'conf-stop'], prompt, 'y');
    expect(yes.code).toBe(0);
    expect(yes.screen).toContain('Instance conf-stop is now stopped.');
    expect(await state('conf-stop')).toMatchObject({ state: 'stopped', activeKeys: 0 });
  });

  it('--yes on a terminal does not ask; off a terminal nothing asks', async () => {
    await readyInstance('conf-yes');
    const r = await onTerminal(['instances', 'terminate', 'conf-yes', '--yes'], null, '');
    expect(r.code).toBe(0);
    expect(r.screen).not.toContain('[y/N]');
    expect((await state('conf-yes')).state).toBe('terminated');

    await readyInstance('conf-script');
    const piped = await runCli(['instances', 'remove', 'conf-script'], { home });
    expect([piped.code, piped.stderr]).toEqual([0, '']);
    expect(piped.stdout).toContain('Removed instance conf-script.');
  });
});

describe('keys create -q', () => {
  it('prints only the secret, so OB_KEY=$(ob-proxy keys create … -q) works', async () => {
    await readyInstance('quiet');
    const r = await runCli(['keys', 'create', '--instance', 'quiet', '--name', 'q', '-q'], { home });
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`^${SECRET.source}\\n$`));
    expect(r.stderr).toBe('');

    // As a shell script would use it: the key goes straight into a variable and works.
    const script =
      `OB_KEY=$('${NODE}' '${BIN}' keys create --instance quiet --name from-shell -q --home '${home}') && ` +
      `printf 'Authorization: Bearer %s\\n' "$OB_KEY" | curl -s -o /dev/null -w '%{http_code}' ${serve.baseUrl}/v1/models -H @-`;
    const status = await new Promise<string>((resolve, reject) => {
      execFile('bash', ['-c', script], { timeout: 20_000 }, (err, stdout) =>
        err === null ? resolve(stdout) : reject(err),
      );
    });
    expect(status).toBe('200');
    await eventually(
      async () =>
        (await cliJson<KeyJson[]>(['keys', 'list', '--instance', 'quiet'], home)).some((k) => k.name === 'from-shell'),
      'the key made in the shell',
    );
  });
});
