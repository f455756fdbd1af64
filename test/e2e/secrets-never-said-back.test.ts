/**
 * A secret given where an id goes, in any case, is never said back: CLI, management API, data
 * plane, log. One describe per defect found, its story above it.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DaemonClient } from '../../cli/daemon-client.js';
import { SECRET_PATTERN } from '../../src/domain/api-key.js';
import { hello, postChat } from '../helpers/chat.js';
import { inprocCli } from '../helpers/inproc-cli.js';
import { runCli } from '../helpers/processes.js';
import { serveWithSimulator } from '../helpers/serve-fixture.js';
import { chat, MODEL, readyInstance } from '../helpers/store-home.js';

/**
 * Regression: a secret pasted with its case changed (upper-cased by a form or a chat tool) into
 * `keys revoke`, `keys reveal`, `usage --key` or `usage --since` was printed back in the error
 * (`No key "OB_SK_…"`, `--since must be … got "OB_SK_…"`). It is not the secret, but its CRC32
 * checksum lets anyone find the casing offline among the few combinations. Only an exact secret
 * was kept out of messages. Now nothing that looks like a secret (`ob_sk_` in any case, then a
 * letter or digit) is said back: the CLI refuses such an argument before running anything, and
 * every message of the daemon quotes what it was given through one function that withholds it;
 * an instance id or key name that looks like one is refused, as names are stored in clear.
 */
describe('a secret with its case changed is never printed back', () => {
  const f = serveWithSimulator([MODEL]);

  /** True when `text` holds any run of the secret's characters long enough to matter, in any case. */
  function leaks(text: string, secret: string): boolean {
    const body = secret.slice('ob_sk_'.length + 13).toLowerCase();
    const lower = text.toLowerCase();
    for (let i = 0; i + 8 <= body.length; i++) if (lower.includes(body.slice(i, i + 8))) return true;
    return /ob_sk_[0-9a-z]/i.test(text);
  }

  it('never says back a secret changed in case, in the CLI, the management API, the data plane or the log', async () => {
    const { serve, home, sim } = f;
    const { keyId, secret } = await readyInstance(home, 'gpu-1', sim.url);
    const upper = secret.toUpperCase();
    const mixed = `Ob_Sk_${secret.slice(6)}`.replace(/[a-z]/, (c) => c.toUpperCase());
    const cut = secret.slice(0, -3).toUpperCase();

    const refusal =
      "error: An argument looks like a key's secret (it holds ob_sk_ in some case); no command takes one, and it is not printed back. " +
      'A key is named by its id, the 12 characters after ob_sk_ exactly as `ob-proxy keys list` shows them. ' +
      'If it is a real secret with its case changed, it is now in your shell history and can be recovered from it: revoke that key (`ob-proxy keys revoke <id>`).\n';
    // Every command in process (the refusal runs before any connection, so none is made), and one
    // per spelling as a process: the exit code and stderr of the binary. Thirty-six processes
    // started one after another outlasted the test's time on a loaded machine.
    const cli = inprocCli(null);
    for (const s of [upper, mixed, cut]) {
      const spawned = await runCli(['keys', 'revoke', s, '--yes'], { home });
      expect(spawned).toEqual({ code: 2, stdout: '', stderr: refusal });
      for (const args of [
        ['keys', 'revoke', s, '--yes'],
        ['keys', 'reveal', s],
        ['usage', '--key', s],
        ['usage', '--since', s],
        ['usage', '--instance', s],
        ['keys', 'limit', s, '--rpm', '5'],
        ['instances', 'show', s],
        ['instances', 'add', s, '--model', MODEL],
        ['instances', 'extend', 'gpu-1', '--pack-ends', s],
        ['keys', 'create', '--instance', 'gpu-1', '--name', `ci ${s}`],
        ['keys', 'create', '--instance', 'gpu-1', '--name', 'ci', '--rpm', s],
        [s],
      ]) {
        const r = await cli.run(...args);
        expect({ args: args.map((a) => a.replace(s, '<s>')), ...r }).toEqual({
          args: args.map((a) => a.replace(s, '<s>')),
          code: 2,
          stdout: '',
          stderr: refusal,
        });
      }
    }
    expect(cli.connected).toEqual([]);

    // The management API, as the console and scripts reach it: each refusal, whole.
    const api = new DaemonClient(join(home, 'ob-proxy.sock'));
    const notAnId =
      "That looks like a key's secret (it holds ob_sk_ in some case), not a key id, and is not said back. " +
      'A key is named by its id, the 12 characters after ob_sk_ exactly as the key has them; list keys with `ob-proxy keys list`.';
    const withheld = "[what looks like a key's secret, not shown]";
    for (const s of [upper, mixed, cut]) {
      for (const call of [
        () => api.revokeKey(s),
        () => api.revealKey(s),
        () => api.setKeyLimits(s, { rpm: 5 }),
        () => api.usage({ key: s }),
      ]) {
        await expect(call()).rejects.toMatchObject({ code: 'key_not_found', message: notAnId });
      }
      await expect(api.usage({ instance: s })).rejects.toMatchObject({
        code: 'instance_not_found',
        message: `No instance ${withheld}, and no keys of one by that id. List instances with \`ob-proxy instances list\`.`,
      });
      await expect(api.usage({ since: s })).rejects.toMatchObject({
        code: 'invalid_argument',
        message: 'since must be an ISO 8601 time with a zone, e.g. 2026-12-01T18:00:00Z.',
      });
      await expect(api.getInstance(s)).rejects.toMatchObject({
        code: 'instance_not_found',
        message: `No instance "${withheld}". List instances with \`ob-proxy instances list\`.`,
      });
      await expect(api.addInstance({ id: s, model: MODEL })).rejects.toMatchObject({
        code: 'invalid_argument',
        message:
          "Instance id must not look like a key's secret (ob_sk_…, in any case): ids are stored and shown in clear.",
      });
      await expect(api.addInstance({ id: 'gpu-2', model: s })).rejects.toMatchObject({
        code: 'unknown_model',
        message: expect.stringMatching(
          /^Model "\[what looks like a key's secret, not shown\]" is not allowed: the allowed models are [^"]+ Allow it first with `ob-proxy models allow MODEL`\.$/,
        ),
      });
      await expect(api.createKey('gpu-1', `ci ${s}`)).rejects.toMatchObject({
        code: 'invalid_argument',
        param: 'name',
        message:
          "Key name must not contain a key's secret: names are stored and shown in clear. Give a name that says who uses the key.",
      });
    }
    const unknownRoute = await fetchRoute(join(home, 'ob-proxy.sock'), `/v1/keys/${upper}/nothing`);
    expect(unknownRoute).toEqual({
      status: 404,
      message: `No management route GET /v1/keys/${withheld}. Is the CLI newer than the daemon?`,
    });

    // The data plane: the model the client asked for is not said back either.
    const r = await postChat(serve.baseUrl, secret, hello(upper));
    expect(r.status).toBe(400);
    expect((r.json as { error: { message: string } }).error.message).toBe(
      `This API key is bound to a deployment of "${MODEL}"; the request asked for "${withheld}". Set model to "${MODEL}".`,
    );
    const m = await fetch(`${serve.baseUrl}/v1/models/${upper}`, { headers: { authorization: `Bearer ${secret}` } });
    expect(((await m.json()) as { error: { message: string } }).error.message).toBe(
      `This API key serves only "${MODEL}"; there is no model "${withheld}" for it.`,
    );

    // The key is untouched, and nothing of it reached the log.
    expect((await api.listKeys()).map((k) => [k.id, k.status])).toEqual([[keyId, 'active']]);
    expect(serve.lines.filter((l) => leaks(l, secret))).toEqual([]);
  });

  async function fetchRoute(socketPath: string, path: string): Promise<{ status: number; message: string }> {
    const { request } = await import('node:http');
    return new Promise((resolve, reject) => {
      const req = request({ socketPath, path, method: 'GET' }, (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (c: string) => (body += c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            message: (JSON.parse(body) as { error: { message: string } }).error.message,
          }),
        );
      });
      req.once('error', reject);
      req.end();
    });
  }
});

/**
 * Regression: an operator whose key had leaked ran `ob-proxy keys revoke <the secret>` (the secret
 * is what they had in hand). The daemon answered `No key "ob_sk_…"`: the secret was printed back
 * in clear on stderr (into the terminal's scrollback, a CI log, a script's log), exit 1, and the
 * leaked key stayed active. `keys create --name <a secret>` stored the secret as the key's name,
 * in clear, in db.json, the audit trail and every log line naming the key. Now the CLI refuses
 * any argument that holds a secret before running anything (exit 2), without printing it, naming
 * the key id it holds and how to revoke it; the management API (what the console uses) never says
 * a secret back either, and refuses it as a key name.
 */
describe('a secret given as a key id is refused unprinted', () => {
  const f = serveWithSimulator(['gemma4:26b']);

  it('never prints a secret given where a key id or name belongs, and says which key it is', async () => {
    const { sim, serve, home } = f;
    const { keyId, secret } = await readyInstance(home, 'gpu-1', sim.url);
    const refusal =
      `error: A key's secret was given on the command line; no command takes one. A key is named by its id, the 12 characters after ob_sk_ (here ${keyId}). ` +
      `The secret is now in your shell history: if it was not meant to be seen there, revoke the key (\`ob-proxy keys revoke ${keyId}\`).\n`;
    for (const args of [
      ['keys', 'revoke', secret],
      ['keys', 'revoke', secret, '--yes', '--json'],
      ['keys', 'reveal', secret],
      ['keys', 'limit', secret, '--rpm', '5'],
      ['usage', '--key', secret],
      ['keys', 'create', '--instance', 'gpu-1', '--name', `ci ${secret}`],
      ['keys', 'revoke', `Bearer ${secret}`],
    ]) {
      const r = await runCli(args, { home });
      expect({ args: args.map((a) => a.replace(secret, '<secret>')), ...r }).toEqual({
        args: args.map((a) => a.replace(secret, '<secret>')),
        code: 2,
        stdout: '',
        stderr: refusal,
      });
    }

    // The management API, as the console and scripts reach it.
    const api = new DaemonClient(join(home, 'ob-proxy.sock'));
    const byId =
      `That is a key's secret, not its id. A key is named by its id, the 12 characters after ob_sk_ (here ${keyId}); ` +
      'list keys with `ob-proxy keys list`.';
    for (const call of [
      () => api.revokeKey(secret),
      () => api.revealKey(secret),
      () => api.setKeyLimits(secret, { rpm: 5 }),
      () => api.usage({ key: secret }),
    ]) {
      await expect(call()).rejects.toMatchObject({ code: 'key_not_found', message: byId });
    }
    await expect(api.createKey('gpu-1', `ci ${secret}`)).rejects.toMatchObject({
      code: 'invalid_argument',
      param: 'name',
      message:
        "Key name must not contain a key's secret: names are stored and shown in clear. Give a name that says who uses the key.",
    });

    // The key is still the only one, active; revoked by the id the refusal named, it is refused.
    expect((await api.listKeys()).map((k) => [k.id, k.name, k.status])).toEqual([[keyId, 'default', 'active']]);
    expect((await runCli(['keys', 'revoke', keyId], { home })).code).toBe(0);
    expect((await postChat(serve.baseUrl, secret, chat())).status).toBe(401);

    const store = await readFile(join(home, 'db.json'), 'utf8');
    const journal = await readFile(join(home, 'db.json.journal'), 'utf8');
    expect(SECRET_PATTERN.test(store + journal)).toBe(false);
    expect(serve.lines.filter((l) => SECRET_PATTERN.test(l))).toEqual([]);
  });
});
