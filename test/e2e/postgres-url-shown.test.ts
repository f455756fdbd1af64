/**
 * Regression: a PostgreSQL store URL with its password in the query string
 * (`postgres://ob@db/obproxy?password=…`, which node-postgres reads like one in the user part)
 * was shown whole: in the daemon's "ob-proxy serving" log line, in `ob-proxy status` (pretty and
 * --json), in the refusal of a store that cannot be reached, and in `store migrate`'s report.
 * Only a password in the user part was taken out. Now every query value other than a known,
 * harmless setting (sslmode, application_name, …) is shown as `***`, everywhere the URL is shown.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { runCli, startServe, tmpHome } from '../helpers/processes.js';
import { type TestDatabase, freshDatabase } from '../helpers/postgres.js';

const PASSWORD = 'hunter2-in-the-query';
const SSL_PASSWORD = 'key-passphrase-9';

let db: TestDatabase;
beforeAll(async () => {
  db = await freshDatabase();
});
afterAll(async () => {
  await db?.drop();
});

/** The test server trusts local connections, so the password is sent and not needed. */
function withSecrets(url: string): string {
  const u = new URL(url);
  u.searchParams.set('password', PASSWORD);
  u.searchParams.set('sslpassword', SSL_PASSWORD);
  u.searchParams.set('application_name', 'ob-proxy-test');
  return u.toString();
}

function expectNoSecret(text: string): void {
  expect(text).not.toContain(PASSWORD);
  expect(text).not.toContain(SSL_PASSWORD);
}

it('shows the store URL of a running daemon without the password in its query', { timeout: 60_000 }, async () => {
  const home = await tmpHome();
  const serve = await startServe(home, [], { OB_PROXY_STORE: withSecrets(db.url) });
  try {
    const status = await runCli(['status', '--json'], { home });
    expect(status.code, status.stderr).toBe(0);
    const { store } = JSON.parse(status.stdout) as { store: string };
    const shown = new URL(db.url);
    expect(store).toBe(
      `postgres://${shown.username}@${shown.host}${shown.pathname}?password=***&sslpassword=***&application_name=ob-proxy-test`,
    );
    const pretty = await runCli(['status'], { home });
    expect(pretty.code, pretty.stderr).toBe(0);
    expect(pretty.stdout).toContain('password=***');
    expectNoSecret(pretty.stdout);
    const serving = serve.logs().find((l) => l.msg === 'ob-proxy serving');
    expect(serving?.store).toBe(store);
  } finally {
    expect(await serve.stop()).toBe(0);
  }
  expectNoSecret(serve.lines.join('\n'));
  expectNoSecret(serve.stderr.join(''));
});

it('refuses a store it cannot reach without showing the password', { timeout: 30_000 }, async () => {
  const home = await tmpHome();
  const unreachable = new URL(withSecrets(db.url));
  unreachable.port = '1';
  const r = await runCli(['serve', '--port', '0'], { home, env: { OB_PROXY_STORE: unreachable.toString() } });
  expect(r.code).not.toBe(0);
  expect(r.stderr).toMatch(/cannot be reached/);
  expect(r.stderr).toContain('password=***');
  expectNoSecret(r.stderr + r.stdout);
});

it('reports a migration without the password', { timeout: 30_000 }, async () => {
  const home = await tmpHome();
  // A store with one instance, written by a daemon that has stopped.
  const lowdb = await startServe(home);
  expect((await runCli(['instances', 'add', 'gpu-1', '--model', 'gemma4:26b'], { home })).code).toBe(0);
  expect(await lowdb.stop()).toBe(0);
  const r = await runCli(['store', 'migrate', '--from', `${home}/db.json`, '--to', withSecrets(db.url), '--json']);
  expect(r.code, r.stderr).toBe(0);
  expect((JSON.parse(r.stdout) as { to: string }).to).toContain('password=***');
  expectNoSecret(r.stdout + r.stderr);
});
