import { Command } from 'commander';
import { type CliDeps, example } from '../common.js';
import { printJson } from '../output.js';

interface MigrateOptions { from: string; to: string; force?: boolean; json?: boolean }

/** `ob-proxy store migrate`: works on the stores themselves, not through a daemon. */
export function makeStoreCommand(deps: CliDeps): Command {
  const cmd = new Command('store').description('move the store between backends (lowdb file → PostgreSQL)');
  example(cmd.command('migrate')
    .description('copy a lowdb store (instances, key hashes, usage, audit trail) into an empty PostgreSQL database; stop the daemon first')
    .requiredOption('--from <db.json>', 'the lowdb store file (a daemon\'s <home>/db.json)')
    .requiredOption('--to <postgres-url>', 'the PostgreSQL database, postgres://user@host/db (or OB_PROXY_STORE)')
    .option('--force', 'replace what the database already holds')
    .option('--json', 'print exactly one JSON document on stdout')
    .action(async (o: MigrateOptions) => {
      // Loaded only here: no other command loads the PostgreSQL driver.
      const { migrateLowdbToPostgres } = await import('../../src/store/migrate-store.js');
      const notices: string[] = [];
      const report = await migrateLowdbToPostgres({ from: o.from, to: o.to, force: o.force === true, onNotice: (m) => notices.push(m) });
      if (o.json === true) return printJson(deps.io, { ...report, notices });
      for (const n of notices) deps.io.err(`note: ${n}\n`);
      const c = report.copied;
      deps.io.out(`Copied ${report.from} into ${report.to}: ${c.instances} instance(s), ${c.keys} key(s) (${c.activeKeys} active, ${c.revokedKeys} revoked), ${c.events} audit event(s), ${c.requests} request(s) of usage; counts verified.\nStart the daemons with --store ${report.to} (and the password, if any).\n`);
    }), 'ob-proxy store migrate --from ~/.ob-proxy/db.json --to postgres://ob@db.internal/obproxy');
  return cmd;
}
