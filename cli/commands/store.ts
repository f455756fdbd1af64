import { homedir } from 'node:os';
import { Command } from 'commander';
import { resolvePaths } from '../../src/config-resolve.js';
import { ObProxyError } from '../../src/errors.js';
import type { StoreData } from '../../src/store/store.js';
import { isPostgresUrl } from '../../src/store/store-url.js';
import { type CliDeps, type CommonOptions, example, settingOption, withClient, withCommon } from '../common.js';
import { printJson } from '../output.js';

interface MigrateOptions {
  from: string;
  to: string;
  force?: boolean;
  json?: boolean;
}
interface BackupOptions extends CommonOptions {
  store?: string;
  force?: boolean;
}

/**
 * The state to back up: from the daemon when one answers on the socket (its view, taken under its
 * lock, with usage and any revocation not yet written), else read from the lowdb files.
 */
async function backupSource(
  o: BackupOptions,
  deps: CliDeps,
): Promise<{ data: StoreData; from: string; via: 'daemon' | 'file' }> {
  try {
    const r = await withClient(o, deps, (cl) => cl.backup());
    return { data: r.data, from: r.store, via: 'daemon' };
  } catch (err) {
    if (!(err instanceof ObProxyError) || err.code !== 'daemon_unreachable') throw err;
  }
  const { store } = resolvePaths(o, deps.io.env, deps.homedir ?? homedir());
  if (isPostgresUrl(store)) {
    throw new Error(
      'No daemon answered on the socket, and a PostgreSQL store is backed up through a daemon (start one, or give --socket) or with pg_dump.',
    );
  }
  const { readLowdbBackup } = await import('../../src/store/backup.js');
  return { data: await readLowdbBackup(store), from: store, via: 'file' };
}

/** `ob-proxy store migrate`: works on the stores themselves, not through a daemon. */
export function makeStoreCommand(deps: CliDeps): Command {
  const cmd = new Command('store').description(
    'back up the store, or move it between backends (lowdb file → PostgreSQL)',
  );
  example(
    withCommon(cmd.command('backup'))
      .description(
        'write a consistent copy of the store (instances, key hashes, usage, audit trail, every revocation) to <file>, mode 0600; through the daemon if one runs, else from the files. Restore: stop the daemon, copy it back as <home>/db.json, start',
      )
      .argument('<file>', 'where to write the backup (a store file: JSON, never a secret)')
      .addOption(settingOption('store', 'with no daemon running: the lowdb store file'))
      .option('--force', 'replace <file> if it exists')
      .action(async (file: string, o: BackupOptions) => {
        const source = await backupSource(o, deps);
        const { backupCounts, writeBackup } = await import('../../src/store/backup.js');
        const lowdb = isPostgresUrl(source.from) ? undefined : source.from;
        await writeBackup(file, source.data, { force: o.force === true, store: lowdb });
        const c = backupCounts(source.data);
        if (o.json === true)
          return printJson(deps.io, { file, from: source.from, via: source.via, version: source.data.version, ...c });
        deps.io.out(
          `Backed up ${source.from} (${source.via === 'daemon' ? 'through the running daemon' : 'from the files; no daemon was running'}) to ${file}: ${c.instances} instance(s), ${c.keys} key(s) (${c.activeKeys} active, ${c.revokedKeys} revoked), ${c.events} audit event(s).\n`,
        );
      }),
    'ob-proxy store backup /var/backups/ob-proxy/db-$(date +%F).json',
  );
  example(
    cmd
      .command('migrate')
      .description(
        'copy a lowdb store (instances, key hashes, usage, audit trail) into an empty PostgreSQL database; stop the daemon first',
      )
      .requiredOption('--from <db.json>', "the lowdb store file (a daemon's <home>/db.json)")
      .requiredOption('--to <postgres-url>', 'the PostgreSQL database, postgres://user@host/db')
      .option('--force', 'replace what the database already holds')
      .option('--json', 'print exactly one JSON document on stdout')
      .action(async (o: MigrateOptions) => {
        // Loaded only here: no other command loads the PostgreSQL driver.
        const { migrateLowdbToPostgres } = await import('../../src/store/migrate-store.js');
        const { lockHostOf } = await import('../../src/store/store-lock.js');
        const notices: string[] = [];
        const report = await migrateLowdbToPostgres({
          from: o.from,
          to: o.to,
          force: o.force === true,
          onNotice: (m) => notices.push(m),
          host: lockHostOf(process),
        });
        if (o.json === true) return printJson(deps.io, { ...report, notices });
        for (const n of notices) deps.io.err(`note: ${n}\n`);
        const c = report.copied;
        deps.io.out(
          `Copied ${report.from} into ${report.to}: ${c.instances} instance(s), ${c.keys} key(s) (${c.activeKeys} active, ${c.revokedKeys} revoked), ${c.events} audit event(s), ${c.requests} request(s) of usage; counts verified.\nStart the daemons with --store ${report.to} (and the password, if any).\n`,
        );
      }),
    'ob-proxy store migrate --from ~/.ob-proxy/db.json --to postgres://ob@db.internal/obproxy',
  );
  return cmd;
}
