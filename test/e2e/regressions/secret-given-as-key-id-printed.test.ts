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
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { DaemonClient } from '../../../cli/daemon-client.js';
import { SECRET_PATTERN } from '../../../src/domain/api-key.js';
import { postChat } from '../../helpers/chat.js';
import { runCli } from '../../helpers/processes.js';
import { serveWithSimulator } from '../../helpers/serve-fixture.js';
import { chat, readyInstance } from '../../helpers/store-home.js';

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
