/**
 * The README's walk-through, pasted as written: its ```sh blocks, in order, in one
 * bash shell, from the checkout, with `npx ob-proxy` as a user runs it. The only things set from
 * outside are what the README itself honours: TMPDIR (where `mktemp -d` makes the home), HOME,
 * and the two ports (`OB_PROXY_PORT`, `SIM_PORT`), free ones here. The ```js block runs as the
 * README says: an .mjs file run in the same shell. Between blocks the test adds only a marker line
 * so each block's output can be checked on its own.
 *
 * The shell runs in a process group of its own: when it has exited, the group must be empty,
 * so the walk-through's last block really stops the daemon and the simulator (`kill %1 %2` used to
 * signal npx and leave the simulator running).
 */
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { homedir, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../helpers/free-port.js';

const ROOT = resolve(import.meta.dirname, '../..');

interface Blocks {
  sh: string[];
  js: { after: number; text: string }[];
}

/** The fenced blocks of the README's Walk-through section, in order. */
function walkThrough(readme: string): Blocks {
  const start = readme.indexOf('\n## Walk-through\n');
  const end = readme.indexOf('\n## ', start + 1);
  const section = readme.slice(start, end === -1 ? undefined : end);
  const blocks: Blocks = { sh: [], js: [] };
  for (const m of section.matchAll(/^```(\w+)\n([\s\S]*?)^```$/gm)) {
    if (m[1] === 'sh') blocks.sh.push(m[2]!);
    else if (m[1] === 'js') blocks.js.push({ after: blocks.sh.length, text: m[2]! });
  }
  return blocks;
}

function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}

let pgid: number | undefined;
afterAll(() => {
  // A failed run must not leave a daemon behind for the other suites.
  if (pgid !== undefined && groupAlive(pgid)) process.kill(-pgid, 'SIGKILL');
});

describe('README walk-through', () => {
  it('runs pasted top to bottom, answers curl and the openai SDK, revokes on stop, and leaves no process', async () => {
    const blocks = walkThrough(await readFile(join(ROOT, 'README.md'), 'utf8'));
    expect(blocks.sh).toHaveLength(4);
    expect(blocks.js).toHaveLength(1);

    const tmp = await mkdtemp(join(tmpdir(), 'obr-'));
    const home = join(tmp, 'home');
    const jsDir = join(tmp, 'sdk');
    await mkdir(home);
    await mkdir(jsDir);
    // The SDK from the checkout, as `npm i openai` would provide it.
    await symlink(join(ROOT, 'node_modules'), join(jsDir, 'node_modules'));
    await writeFile(join(jsDir, 'walkthrough.mjs'), blocks.js[0]!.text);

    let script = 'set -eu -o pipefail\n';
    blocks.sh.forEach((b, i) => {
      script += `echo "@@block ${i}@@"\n${b}\n`;
      // The stream's tokens end without a newline: the echo ends the line, as a prompt would.
      if (blocks.js[0]!.after === i + 1)
        script += `echo "@@js@@"\nnode ${JSON.stringify(join(jsDir, 'walkthrough.mjs'))}\necho\n`;
    });

    const [port, simPort] = [await freePort(), await freePort()];
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env))
      if (v !== undefined && !k.startsWith('OB_') && k !== 'SIM_PORT') env[k] = v;
    Object.assign(env, {
      HOME: home,
      TMPDIR: tmp,
      OB_PROXY_PORT: String(port),
      SIM_PORT: String(simPort),
      NO_COLOR: '1',
      // npx keeps its link to this checkout in npm's cache: the real one, so nothing is fetched.
      npm_config_cache: process.env.npm_config_cache ?? join(homedir(), '.npm'),
      // npm's own chatter ("new major version available") is not the walk-through's.
      npm_config_update_notifier: 'false',
      // The first npx in a checkout installs it into npx's cache, which runs its `prepare` (the
      // build): dist/ rewritten under the suites running beside this one, which then load half a
      // build ("does not provide an export named …"). The checkout is built already.
      npm_config_ignore_scripts: 'true',
    });

    const bash = spawn('bash', ['-c', script], { cwd: ROOT, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    pgid = bash.pid!;
    let stdout = '';
    let stderr = '';
    bash.stdout.setEncoding('utf8').on('data', (s: string) => {
      stdout += s;
    });
    bash.stderr.setEncoding('utf8').on('data', (s: string) => {
      stderr += s;
    });
    const guard = setTimeout(() => {
      if (groupAlive(pgid!)) process.kill(-pgid!, 'SIGKILL');
    }, 110_000);
    const code = await new Promise<number | null>((r) => bash.once('close', (c) => r(c)));
    clearTimeout(guard);
    expect({ code, stderr: stderr.split('\n').filter((l) => l !== '' && !/^npm (warn|notice)/.test(l)) }).toEqual({
      code: 0,
      stderr: [],
    });

    // Nothing the walk-through started is left: the daemon and the simulator have exited.
    expect(groupAlive(pgid)).toBe(false);

    const parts = stdout.split(/^@@(block \d|js)@@\n/m).slice(1);
    const out = new Map<string, string>();
    for (let i = 0; i < parts.length; i += 2) out.set(parts[i]!, parts[i + 1]!);
    expect([...out.keys()]).toEqual(['block 0', 'block 1', 'block 2', 'js', 'block 3']);

    expect(out.get('block 0')).toBe('');
    const ready = out.get('block 1')!;
    expect(ready).toMatch(/^Added instance gpu-1 \(gemma4:26b\), state pending\./);
    // The ports reached the daemon and the instance through the README's own variables.
    expect(ready).toContain(`Instance gpu-1 is ready (gemma4:26b at http://127.0.0.1:${simPort}).`);
    expect(ready).toContain(`baseURL http://127.0.0.1:${port}/v1`);
    const defaultKeyId = /Default key "default" \(id (\w+)\):\n\n {2}ob_sk_\1_[0-9A-Za-z]{38}\n/.exec(ready)?.[1];
    expect(defaultKeyId).toBeDefined();

    const chat = JSON.parse(out.get('block 2')!) as unknown;
    expect(chat).toEqual({
      id: expect.stringMatching(/^chatcmpl-/),
      object: 'chat.completion',
      created: expect.any(Number),
      model: 'gemma4:26b',
      system_fingerprint: 'fp_ollama',
      choices: [
        { index: 0, message: { role: 'assistant', content: 't0 t1 t2 t3 t4 t5 t6 t7 ' }, finish_reason: 'stop' },
      ],
      usage: { prompt_tokens: expect.any(Number), completion_tokens: 8, total_tokens: expect.any(Number) },
    });
    // The SDK's plain answer, then the stream's tokens, as the snippet prints them.
    expect(out.get('js')).toBe('t0 t1 t2 t3 t4 t5 t6 t7 \nt0 t1 t2 t3 t4 t5 t6 t7 \n');

    const stopBlock = out.get('block 3')!;
    expect(stopBlock).toMatch(
      /^Pack of gpu-1 now ends \S+; its 2 key\(s\) keep working\.\nInstance gpu-1 is now stopped\. All its keys are revoked\.\n/,
    );
    const revoked = stopBlock
      .split('\n')
      .filter((l) => /\binstance_stopped\b/.test(l))
      .map((l) => l.split(/\s+/).slice(1));
    expect(revoked).toEqual([
      [defaultKeyId, 'default', 'gpu-1', 'instance_stopped'],
      [expect.any(String), 'notebook', 'gpu-1', 'instance_stopped'],
    ]);

    // The home: the store is there, the socket and both pid files are gone, the daemon logged its stop.
    const [walkHome] = (await readdir(tmp)).filter((f) => f.startsWith('tmp.'));
    const files = await readdir(join(tmp, walkHome!));
    expect(files).toContain('db.json');
    expect(files.filter((f) => f.endsWith('.sock') || f.endsWith('.pid'))).toEqual([]);
    const log = (await readFile(join(tmp, walkHome!, 'serve.log'), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { msg: string });
    expect(log.at(-1)!.msg).toBe('stopped');
    // The secrets the walk-through printed are in no file it left.
    for (const f of files)
      expect(await readFile(join(tmp, walkHome!, f), 'utf8')).not.toMatch(/ob_sk_[0-9A-Za-z]{12}_/);
    await rm(tmp, { recursive: true, force: true });
  }, 120_000);
});
