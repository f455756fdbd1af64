/**
 * Every serve setting with a bad value is a usage error: exit 2, one line on stderr
 * naming the flag as typed (`--port`, with the variable that also sets it) or, for a setting
 * read from the environment only, the variable; nothing is created in the home.
 */
import { execFile } from 'node:child_process';
import { readdir } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { BIN, NODE, tmpHome } from '../helpers/processes.js';

interface Exit {
  code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
}

function serve(args: string[], env: Record<string, string>, home: string): Promise<Exit> {
  const clean: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith('OB_PROXY_')) clean[k] = v;
  return new Promise((resolve) => {
    execFile(
      NODE,
      [BIN, 'serve', '--home', home, ...args],
      { env: { ...clean, NO_COLOR: '1', ...env }, timeout: 10_000, killSignal: 'SIGKILL' },
      (err, stdout, stderr) => {
        const e = err as (Error & { code?: number | string; signal?: string | null }) | null;
        resolve({
          code: e === null ? 0 : typeof e.code === 'number' ? e.code : null,
          signal: e?.signal ?? null,
          stdout,
          stderr,
        });
      },
    );
  });
}

const S = 'must be a number of seconds from';
const B = 'must be a number of bytes from 1024 to 1073741824, without a fraction';

/** [what is given, flags, environment, the whole stderr line after "error: "] */
const table: [string, string[], Record<string, string>, string][] = [
  [
    '--port not a number',
    ['--port', 'eighty'],
    {},
    '--port (or OB_PROXY_PORT) must be a number from 0 to 65535, without a fraction, got "eighty".',
  ],
  [
    '--port out of range',
    ['--port', '70000'],
    {},
    '--port (or OB_PROXY_PORT) must be a number from 0 to 65535, without a fraction, got "70000".',
  ],
  [
    'OB_PROXY_PORT',
    [],
    { OB_PROXY_PORT: '80.5' },
    '--port (or OB_PROXY_PORT) must be a number from 0 to 65535, without a fraction, got "80.5".',
  ],
  [
    '--host a URL',
    ['--host', 'http://0.0.0.0'],
    {},
    '--host (or OB_PROXY_HOST) must be an address to listen on, such as 127.0.0.1, 0.0.0.0 or ::, got "http://0.0.0.0".',
  ],
  [
    '--store another scheme (its password not echoed)',
    ['--store', 'mysql://u:pw@db/x'],
    {},
    '--store (or OB_PROXY_STORE) "db/x" is not supported: use a lowdb file path (default <home>/db.json) or a postgres:// URL.',
  ],
  [
    '--upstream-timeout negative',
    ['--upstream-timeout', '-5'],
    {},
    `--upstream-timeout (or OB_PROXY_UPSTREAM_TIMEOUT) ${S} 0.001 to 86400, got "-5".`,
  ],
  [
    'OB_PROXY_UPSTREAM_TIMEOUT empty-ish',
    [],
    { OB_PROXY_UPSTREAM_TIMEOUT: ' ' },
    `--upstream-timeout (or OB_PROXY_UPSTREAM_TIMEOUT) ${S} 0.001 to 86400, got " ".`,
  ],
  ['--grace negative', ['--grace', '-1'], {}, `--grace (or OB_PROXY_GRACE) ${S} 0 to 86400, got "-1".`],
  ['--body-limit too small', ['--body-limit', '10'], {}, `--body-limit (or OB_PROXY_BODY_LIMIT) ${B}, got "10".`],
  [
    '--max-frame-bytes',
    ['--max-frame-bytes', '1e99'],
    {},
    `--max-frame-bytes (or OB_PROXY_MAX_FRAME_BYTES) ${B}, got "1e99".`,
  ],
  [
    '--max-answer-bytes',
    ['--max-answer-bytes', '2048.5'],
    {},
    `--max-answer-bytes (or OB_PROXY_MAX_ANSWER_BYTES) ${B}, got "2048.5".`,
  ],
  [
    '--max-error-bytes',
    ['--max-error-bytes', 'lots'],
    {},
    `--max-error-bytes (or OB_PROXY_MAX_ERROR_BYTES) ${B}, got "lots".`,
  ],
  [
    '--response-deadline zero',
    ['--response-deadline', '0'],
    {},
    `--response-deadline (or OB_PROXY_RESPONSE_DEADLINE) ${S} 1 to 604800, got "0".`,
  ],
  ['--max-stale', ['--max-stale', '0'], {}, `--max-stale (or OB_PROXY_MAX_STALE) ${S} 1 to 86400, got "0".`],
  [
    '--log-level',
    ['--log-level', 'loud'],
    {},
    '--log-level (or OB_PROXY_LOG_LEVEL) must be one of fatal, error, warn, info, debug, trace, silent, got "loud".',
  ],
  [
    '--log-format',
    ['--log-format', 'xml'],
    {},
    '--log-format (or OB_PROXY_LOG_FORMAT) must be json or pretty, got "xml".',
  ],
  [
    '--metrics-port',
    ['--metrics-port', '-1'],
    {},
    '--metrics-port (or OB_PROXY_METRICS_PORT) must be a number from 0 to 65535, without a fraction, got "-1".',
  ],
  [
    '--metrics-host',
    ['--metrics-host', 'a b'],
    {},
    '--metrics-host (or OB_PROXY_METRICS_HOST) must be an address to listen on, such as 127.0.0.1, 0.0.0.0 or ::, got "a b".',
  ],
  [
    '--tls-cert alone',
    ['--tls-cert', '/x.pem'],
    {},
    '--tls-cert and --tls-key go together: --tls-key (or OB_PROXY_TLS_KEY) is missing.',
  ],
  [
    'OB_PROXY_TLS_KEY alone',
    [],
    { OB_PROXY_TLS_KEY: '/x.key' },
    '--tls-cert and --tls-key go together: --tls-cert (or OB_PROXY_TLS_CERT) is missing.',
  ],
  [
    '--socket-group unknown',
    ['--socket-group', 'no-such-group-obt'],
    {},
    '--socket-group "no-such-group-obt" is not a group on this system. Give an existing group name or a numeric gid (getent group no-such-group-obt).',
  ],
  [
    'OB_PROXY_CONNECT_TIMEOUT',
    [],
    { OB_PROXY_CONNECT_TIMEOUT: '-3' },
    `OB_PROXY_CONNECT_TIMEOUT ${S} 0.001 to 3600, got "-3".`,
  ],
  [
    'OB_PROXY_IDLE_TIMEOUT',
    [],
    { OB_PROXY_IDLE_TIMEOUT: 'never' },
    `OB_PROXY_IDLE_TIMEOUT ${S} 0.001 to 86400, got "never".`,
  ],
  [
    'OB_PROXY_REQUEST_TIMEOUT',
    [],
    { OB_PROXY_REQUEST_TIMEOUT: '0' },
    `OB_PROXY_REQUEST_TIMEOUT ${S} 0.1 to 3600, got "0".`,
  ],
  [
    'OB_PROXY_USAGE_FLUSH_MS',
    [],
    { OB_PROXY_USAGE_FLUSH_MS: '1' },
    'OB_PROXY_USAGE_FLUSH_MS must be a number of milliseconds from 10 to 3600000, got "1".',
  ],
  [
    'OB_PROXY_BAD_KEY_LIMIT',
    [],
    { OB_PROXY_BAD_KEY_LIMIT: '-1' },
    'OB_PROXY_BAD_KEY_LIMIT must be a number from 0 to 1000000, without a fraction, got "-1".',
  ],
  [
    'OB_PROXY_STORE_CATCHUP_MS',
    [],
    { OB_PROXY_STORE_CATCHUP_MS: '5' },
    'OB_PROXY_STORE_CATCHUP_MS must be a number of milliseconds from 50 to 600000, without a fraction, got "5".',
  ],
  [
    'OB_PROXY_METRICS_KEY_LABEL',
    [],
    { OB_PROXY_METRICS_KEY_LABEL: 'yes' },
    'OB_PROXY_METRICS_KEY_LABEL must be on or off, got "yes".',
  ],
  [
    'OB_PROXY_RELAY_FAST_PATH',
    [],
    { OB_PROXY_RELAY_FAST_PATH: 'off' },
    'OB_PROXY_RELAY_FAST_PATH must be 0 or 1, got "off".',
  ],
  ['a misspelt flag', ['--prot', '8080'], {}, "unknown option '--prot' (did you mean --port?)"],
];

describe('serve: bad settings are usage errors naming the flag', () => {
  it.each(table)('%s', async (_what, args, env, message) => {
    const home = await tmpHome();
    const portGiven = args.includes('--port') || env.OB_PROXY_PORT !== undefined;
    const r = await serve([...args, ...(portGiven ? [] : ['--port', '0'])], env, home);
    expect({ code: r.code, signal: r.signal, stdout: r.stdout, stderr: r.stderr }).toEqual({
      code: 2,
      signal: null,
      stdout: '',
      stderr: `error: ${message}\n`,
    });
    expect(await readdir(home)).toEqual([]);
  });
});
