import { execFile, spawn } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { BIN, NODE, eventually, tmpHome } from '../helpers/processes.js';

let proc: ReturnType<typeof spawn> | undefined;
afterEach(async () => {
  if (proc !== undefined && proc.exitCode === null) {
    const exited = new Promise((r) => proc!.once('exit', r));
    proc.kill('SIGINT');
    await exited;
  }
});

describe('ob-proxy demo', () => {
  it('prints an export line and a curl line that work when pasted, and stops cleanly on Ctrl-C', async () => {
    const home = await tmpHome();
    proc = spawn(NODE, [BIN, 'demo', '--port', '0', '--home', home], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    proc.stdout!.setEncoding('utf8').on('data', (s: string) => {
      out += s;
    });
    await eventually(() => out.includes('Press Ctrl-C to stop.'), 'the whole demo text', 15_000);
    const lines = out.split('\n');
    const exported = lines.find((l) => l.startsWith('export OB_KEY='));
    const curl = lines.find((l) => l.startsWith('printf ') && l.includes('| curl '));
    expect(exported).toMatch(/^export OB_KEY=ob_sk_[0-9A-Za-z_]+$/);
    expect(out).toMatch(/demo-gemma4 +gemma4:26b +key ob_sk_/);
    expect(out).toMatch(/demo-qwen36 +qwen3\.6:27b +key ob_sk_/);
    expect(out).toContain("new OpenAI({ baseURL: 'http://127.0.0.1:");
    expect(out).toContain('apiKey: process.env.OB_KEY');
    // From the npm package, npx finds the CLI again (the single binary names itself: test/package/binary.test.ts).
    expect(lines).toContain(
      `Manage it from another terminal: npx ob-proxy instances list --home ${home}   (or: npx ob-proxy console --home ${home})`,
    );

    // The secret was inside the curl command line (argv, shell history). Only the key
    // list and the export line hold a secret; the examples read $OB_KEY.
    const withSecret = lines.filter((l) => l.includes('ob_sk_') && !l.includes('ob_sk_…'));
    expect(withSecret.filter((l) => !/^ {2}demo-\S+ +\S+ +key ob_sk_/.test(l))).toEqual([exported]);
    // Not even expanded into curl's arguments: the header reaches curl on stdin.
    expect(curl).toContain('"$OB_KEY" | curl ');
    expect(curl!.split('| curl ')[1]).not.toContain('OB_KEY');

    // Pasted as printed: the export line, then the curl line, in a shell without OB_KEY.
    const env = { ...process.env };
    delete env.OB_KEY;
    const stdout = await new Promise<string>((resolve, reject) => {
      execFile('bash', ['-c', `${exported!}\n${curl!}`], { env, timeout: 10_000 }, (err, so) =>
        err === null ? resolve(so) : reject(err),
      );
    });
    expect(JSON.parse(stdout)).toEqual({
      id: expect.stringMatching(/^chatcmpl-/),
      object: 'chat.completion',
      created: expect.any(Number),
      model: 'gemma4:26b',
      system_fingerprint: 'fp_ollama',
      choices: [
        { index: 0, message: { role: 'assistant', content: expect.stringMatching(/^t0 t1 /) }, finish_reason: 'stop' },
      ],
      usage: { prompt_tokens: expect.any(Number), completion_tokens: 12, total_tokens: expect.any(Number) },
    });

    const code = new Promise((r) => proc!.once('exit', (c) => r(c)));
    proc.kill('SIGINT');
    expect(await code).toBe(0);
  });
});
