/**
 * Admin commands that cannot hurt (issue 14), through the real CLI: confirmation on a terminal
 * (a pseudo-terminal made by `script`), none off one; usage errors that name the flag, with
 * "did you mean"; `--pack-ends` durations; `keys create -q`.
 */
import { execFile, spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, NODE, type ServeProcess, type SimProcess, cliJson, eventually, runCli, startServe, startSimulate, tmpHome } from '../helpers/processes.js';

const MODEL = 'gemma4:26b';
const SECRET = /ob_sk_[0-9A-Za-z]{12}_[0-9A-Za-z]{38}/;

interface InstanceJson { id: string; state: string; activeKeys: number; packEndsAt: string | null }
interface KeyJson { id: string; name: string; hint: string; status: string; secret?: string }

let home: string;
let serve: ServeProcess;
let sim: SimProcess;

beforeAll(async () => {
  home = await tmpHome();
  sim = await startSimulate([MODEL]);
  serve = await startServe(home);
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
  for (let n = 0; n < extra; n++) keys.push(await cliJson<KeyJson>(['keys', 'create', '--instance', id, '--name', `key-${n}`], home));
  return keys;
}

/**
 * Runs `ob-proxy <args>` on a pseudo-terminal; once the screen shows `prompt`, types `answer`.
 * Resolves with the exit code and everything the terminal showed.
 */
function onTerminal(args: string[], prompt: string | null, answer: string): Promise<{ code: number | null; screen: string }> {
  const command = [NODE, BIN, ...args, '--home', home].map((a) => `'${a}'`).join(' ');
  const proc = spawn('script', ['-qec', command, '/dev/null'], { env: { ...process.env, NO_COLOR: '1' }, stdio: ['pipe', 'pipe', 'pipe'] });
  let screen = '';
  let answered = false;
  proc.stdout.setEncoding('utf8').on('data', (s: string) => {
    screen += s;
    if (!answered && prompt !== null && screen.includes(prompt)) {
      answered = true;
      proc.stdin.write(`${answer}\n`);
    }
  });
  proc.stderr.setEncoding('utf8').on('data', (s: string) => { screen += s; });
  return new Promise((resolve) => proc.once('exit', (code) => {
    proc.stdin.end();
    resolve({ code, screen });
  }));
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

  it('fail, terminate and remove ask too; an empty answer is no', async () => {
    await readyInstance('conf-more');
    const questions = [
      ['fail', 'Mark instance conf-more (gemma4:26b) failed and revoke its 1 active key for ever? [y/N]'],
      ['terminate', 'Terminate instance conf-more (gemma4:26b) for good and revoke its 1 active key for ever? [y/N]'],
      ['remove', 'Remove instance conf-more (gemma4:26b): revoke its 1 active key for ever (they answer 404) and forget the record? [y/N]'],
    ] as const;
    for (const [action, prompt] of questions) {
      const r = await onTerminal(['instances', action, 'conf-more'], prompt, '');
      expect(r.screen, action).toContain(prompt);
      expect(r.code, action).toBe(1);
    }
    expect(await state('conf-more')).toMatchObject({ state: 'ready', activeKeys: 1 });
  });

  it('keys revoke names the key by name and hint', async () => {
    const [key] = await readyInstance('conf-key', 1);
    const prompt = `Revoke key "key-0" (${key!.hint}) of instance conf-key for ever? [y/N]`;
    const r = await onTerminal(['keys', 'revoke', key!.id], prompt, 'yes');
    expect(r.screen).toContain(prompt);
    expect(r.code).toBe(0);
    expect(r.screen).not.toMatch(SECRET);
    const keys = await cliJson<KeyJson[]>(['keys', 'list', '--instance', 'conf-key'], home);
    expect(keys.find((k) => k.id === key!.id)!.status).toBe('revoked');
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

describe('usage errors name the flag', () => {
  it('a misspelt flag or command gets "did you mean", before any missing-option complaint', async () => {
    const nme = await runCli(['keys', 'create', '--nme', 'foo', '--instance', 'x'], { home });
    expect(nme.code).toBe(2);
    expect(nme.stderr).toBe("error: unknown option '--nme' (did you mean --name?)\n");
    const bare = await runCli(['keys', 'create', '--nme', 'foo'], { home });
    expect(bare.stderr).toBe("error: unknown option '--nme' (did you mean --name?)\n");
    const missing = await runCli(['keys', 'create', '--instance', 'x'], { home });
    expect([missing.code, missing.stderr]).toEqual([2, "error: required option '--name <name>' not specified\n"]);
    const cmd = await runCli(['instances', 'lst'], { home });
    expect([cmd.code, cmd.stderr]).toEqual([2, "error: unknown command 'lst' (did you mean list?)\n"]);
    const top = await runCli(['instancs', 'list'], { home });
    expect([top.code, top.stderr]).toEqual([2, "error: unknown command 'instancs' (did you mean instances?)\n"]);
    const yes = await runCli(['instances', 'stop', 'x', '--yse'], { home });
    expect([yes.code, yes.stderr]).toEqual([2, "error: unknown option '--yse' (did you mean --yes?)\n"]);
  });

  it('a bad or past --pack-ends is exit 2 naming --pack-ends, never the JSON field; nothing is added', async () => {
    for (const bad of ['tomorrow', '2030-02-30T00:00:00Z', '+8x', '2020-01-01T00:00:00Z']) {
      const r = await runCli(['instances', 'add', 'bad-date', '--model', MODEL, '--pack-ends', bad], { home });
      expect(r.code, bad).toBe(2);
      expect(r.stdout, bad).toBe('');
      expect(r.stderr, bad).toMatch(/^error: --pack-ends .*\n$/);
      expect(r.stderr, bad).not.toContain('packEndsAt');
    }
    const extend = await runCli(['instances', 'extend', 'bad-date', '--pack-ends', 'next week'], { home });
    expect(extend.code).toBe(2);
    expect(extend.stderr).toContain('--pack-ends');
    expect((await runCli(['instances', 'show', 'bad-date'], { home })).code).toBe(1);
  });

  it('--pack-ends takes a duration from now', async () => {
    const before = Date.now();
    const added = await cliJson<InstanceJson>(['instances', 'add', 'dur', '--model', MODEL, '--pack-ends', '+8h'], home);
    const after = Date.now();
    const at = Date.parse(added.packEndsAt!);
    expect(at).toBeGreaterThanOrEqual(before + 8 * 3_600_000);
    expect(at).toBeLessThanOrEqual(after + 8 * 3_600_000);
    const extended = await cliJson<InstanceJson>(['instances', 'extend', 'dur', '--pack-ends', '+30d'], home);
    expect(Date.parse(extended.packEndsAt!)).toBeGreaterThanOrEqual(before + 30 * 86_400_000);
    const mixed = await cliJson<InstanceJson>(['instances', 'extend', 'dur', '--pack-ends', '+1d12h'], home);
    expect(Date.parse(mixed.packEndsAt!)).toBeGreaterThanOrEqual(before + 36 * 3_600_000);
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
    const script = `OB_KEY=$('${NODE}' '${BIN}' keys create --instance quiet --name from-shell -q --home '${home}') && `
      + `printf 'Authorization: Bearer %s\\n' "$OB_KEY" | curl -s -o /dev/null -w '%{http_code}' ${serve.baseUrl}/v1/models -H @-`;
    const status = await new Promise<string>((resolve, reject) => {
      execFile('bash', ['-c', script], { timeout: 20_000 }, (err, stdout) => (err === null ? resolve(stdout) : reject(err)));
    });
    expect(status).toBe('200');
    await eventually(async () => (await cliJson<KeyJson[]>(['keys', 'list', '--instance', 'quiet'], home)).some((k) => k.name === 'from-shell'), 'the key made in the shell');
  });
});
