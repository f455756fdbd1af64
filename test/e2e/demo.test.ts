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
  it('prints a curl line that works when pasted, and stops cleanly on Ctrl-C', async () => {
    const home = await tmpHome();
    proc = spawn(NODE, [BIN, 'demo', '--port', '0', '--home', home], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    proc.stdout!.setEncoding('utf8').on('data', (s: string) => { out += s; });
    const curl = await eventually(() => out.split('\n').find((l) => l.startsWith('curl ')), 'the curl line', 15_000);
    expect(out).toMatch(/demo-gemma4 +gemma4:26b +key ob_sk_/);
    expect(out).toMatch(/demo-qwen36 +qwen3\.6:27b +key ob_sk_/);
    expect(out).toContain("new OpenAI({ baseURL: 'http://127.0.0.1:");

    const stdout = await new Promise<string>((resolve, reject) => {
      execFile('bash', ['-c', curl], { timeout: 10_000 }, (err, so) => (err === null ? resolve(so) : reject(err)));
    });
    expect(JSON.parse(stdout)).toEqual({
      id: expect.stringMatching(/^chatcmpl-/), object: 'chat.completion', created: expect.any(Number), model: 'gemma4:26b',
      system_fingerprint: 'fp_ollama',
      choices: [{ index: 0, message: { role: 'assistant', content: expect.stringMatching(/^t0 t1 /) }, finish_reason: 'stop' }],
      usage: { prompt_tokens: expect.any(Number), completion_tokens: 12, total_tokens: expect.any(Number) },
    });

    const code = new Promise((r) => proc!.once('exit', (c) => r(c)));
    proc.kill('SIGINT');
    expect(await code).toBe(0);
  });
});
