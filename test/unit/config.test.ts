/**
 * resolveConfig, in process: flag, then environment, then default (docs/contract.md §1), each bad value a
 * usage error naming the flag and the variable that set it. The spawned-process table in
 * test/e2e/serve-usage-errors.test.ts checks that these reach the terminal as exit 2.
 */
import { describe, expect, it } from 'vitest';
import {
  type Config,
  type ConfigFlags,
  type Env,
  SETTINGS,
  type Setting,
  type SettingName,
  cliTimeoutMs,
  waitTimeoutMs,
  debugWanted,
  resolveConfig,
  resolvePaths,
  settingLabel,
} from '../../src/config.js';
import { ObProxyError } from '../../src/errors.js';

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

const DEFAULTS: Config = {
  home: '/home/u/.ob-proxy',
  store: '/home/u/.ob-proxy/db.json',
  socket: '/home/u/.ob-proxy/ob-proxy.sock',
  host: '127.0.0.1',
  port: 8080,
  upstreamTimeoutMs: 300_000,
  connectTimeoutMs: 10_000,
  idleTimeoutMs: 300_000,
  requestTimeoutMs: 120_000,
  graceMs: 30_000,
  bodyLimit: 16 * 1024 * 1024,
  bodyMemory: 256 * MiB,
  bodyMemoryPerKey: 64 * MiB,
  maxFrameBytes: 1024 * 1024,
  maxAnswerBytes: 32 * 1024 * 1024,
  maxErrorBytes: 64 * 1024,
  responseDeadlineMs: 1_800_000,
  models: ['gemma4:26b', 'qwen3.6:27b'],
  logLevel: 'info',
  usageFlushMs: 5000,
  badKeyLimit: 30,
  maxConnections: null,
  maxConnectionsPerAddress: null,
  maxStaleMs: 30_000,
  storeCatchupMs: 500,
  storeFoldBytes: null,
  storeNotify: true,
  corsOrigins: [],
  metricsPort: null,
  metricsHost: '127.0.0.1',
  metricsKeyLabel: true,
  logFormat: null,
  relayFastPath: true,
  tls: null,
  otlp: null,
  socketGroup: null,
  maxConcurrency: null,
  queueSize: 100,
  queueTimeoutMs: 60_000,
  limitWindowMs: 60_000,
  probeIntervalMs: 15_000,
  probeTimeoutMs: 5000,
  packWarningMs: 900_000,
};

function resolve(flags: ConfigFlags = {}, env: Env = {}): Config {
  return resolveConfig(flags, env, '/home/u');
}

function refusal(flags: ConfigFlags, env: Env = {}): { param: string | null; message: string } {
  try {
    resolve(flags, env);
  } catch (err) {
    expect(err).toBeInstanceOf(ObProxyError);
    const e = err as ObProxyError;
    expect(e.code).toBe('invalid_argument');
    return { param: e.param, message: e.message };
  }
  throw new Error('resolveConfig accepted it');
}

describe('resolveConfig', () => {
  it('nothing given: every default, the store and socket in ~/.ob-proxy', () => {
    expect(resolve()).toEqual(DEFAULTS);
  });

  it('OB_PROXY_HOME moves the store and the socket with it; --home wins over it', () => {
    expect(resolve({}, { OB_PROXY_HOME: '/srv/ob' })).toMatchObject({
      home: '/srv/ob',
      store: '/srv/ob/db.json',
      socket: '/srv/ob/ob-proxy.sock',
    });
    expect(resolve({ home: '/a' }, { OB_PROXY_HOME: '/b' })).toMatchObject({
      home: '/a',
      store: '/a/db.json',
      socket: '/a/ob-proxy.sock',
    });
    expect(resolve({ home: '/a', store: '/s/db.json', socket: '/r/s.sock' })).toMatchObject({
      home: '/a',
      store: '/s/db.json',
      socket: '/r/s.sock',
    });
  });

  it('a flag wins over its variable, which wins over the default; empty values count as unset', () => {
    expect(resolve({ port: '9000' }, { OB_PROXY_PORT: '9001' }).port).toBe(9000);
    expect(resolve({}, { OB_PROXY_PORT: '9001' }).port).toBe(9001);
    expect(resolve({ port: '' }, { OB_PROXY_PORT: '' }).port).toBe(8080);
    expect(resolve({ grace: '2.5' }).graceMs).toBe(2500);
    expect(
      resolve({}, { OB_PROXY_MAX_CONCURRENCY: '4', OB_PROXY_QUEUE: '8', OB_PROXY_QUEUE_TIMEOUT: '1.5' }),
    ).toMatchObject({ maxConcurrency: 4, queueSize: 8, queueTimeoutMs: 1500 });
    expect(resolve({ probeInterval: '0' }, { OB_PROXY_PROBE_INTERVAL: '60' }).probeIntervalMs).toBe(0);
  });

  it('the idle limit follows --upstream-timeout unless OB_PROXY_IDLE_TIMEOUT is set', () => {
    expect(resolve({ upstreamTimeout: '20' })).toMatchObject({ upstreamTimeoutMs: 20_000, idleTimeoutMs: 20_000 });
    expect(resolve({ upstreamTimeout: '20' }, { OB_PROXY_IDLE_TIMEOUT: '5' })).toMatchObject({
      upstreamTimeoutMs: 20_000,
      idleTimeoutMs: 5000,
    });
  });

  it('a postgres:// store is kept as given; --host in brackets loses them', () => {
    expect(resolve({ store: 'postgres://ob@db:5432/ob' }).store).toBe('postgres://ob@db:5432/ob');
    expect(resolve({ host: '[::1]' }).host).toBe('::1');
  });

  it('TLS needs both files; CORS origins are trimmed of spaces and a trailing slash', () => {
    expect(resolve({ tlsCert: '/c.pem', tlsKey: '/k.pem' }).tls).toEqual({ cert: '/c.pem', key: '/k.pem' });
    expect(refusal({ tlsCert: '/c.pem' })).toEqual({
      param: 'tls-key',
      message: '--tls-cert and --tls-key go together: --tls-key (or OB_PROXY_TLS_KEY) is missing.',
    });
    expect(resolve({}, { OB_PROXY_CORS_ORIGINS: ' https://a.example/ , https://b.example,' }).corsOrigins).toEqual([
      'https://a.example',
      'https://b.example',
    ]);
  });

  it.each<[string, ConfigFlags, Env, string, string]>([
    [
      '--port',
      { port: 'eighty' },
      {},
      'port',
      '--port (or OB_PROXY_PORT) must be a number from 0 to 65535, without a fraction, got "eighty".',
    ],
    [
      'OB_PROXY_PORT',
      {},
      { OB_PROXY_PORT: '-1' },
      'port',
      '--port (or OB_PROXY_PORT) must be a number from 0 to 65535, without a fraction, got "-1".',
    ],
    [
      '--max-concurrency',
      { maxConcurrency: '0' },
      {},
      'max-concurrency',
      '--max-concurrency (or OB_PROXY_MAX_CONCURRENCY) must be a number from 1 to 100000, without a fraction, got "0".',
    ],
    [
      '--queue',
      { queue: '1.5' },
      {},
      'queue',
      '--queue (or OB_PROXY_QUEUE) must be a number from 0 to 100000, without a fraction, got "1.5".',
    ],
    [
      '--queue-timeout',
      { queueTimeout: 'soon' },
      {},
      'queue-timeout',
      '--queue-timeout (or OB_PROXY_QUEUE_TIMEOUT) must be a number of seconds from 0.001 to 3600, got "soon".',
    ],
    [
      '--probe-interval',
      { probeInterval: '-1' },
      {},
      'probe-interval',
      '--probe-interval (or OB_PROXY_PROBE_INTERVAL) must be a number of seconds from 0 to 86400, got "-1".',
    ],
    [
      '--log-format',
      { logFormat: 'xml' },
      {},
      'log-format',
      '--log-format (or OB_PROXY_LOG_FORMAT) must be json or pretty, got "xml".',
    ],
    [
      'OB_PROXY_RELAY_FAST_PATH',
      {},
      { OB_PROXY_RELAY_FAST_PATH: 'yes' },
      'OB_PROXY_RELAY_FAST_PATH',
      'OB_PROXY_RELAY_FAST_PATH must be 0 or 1, got "yes".',
    ],
    [
      'OB_PROXY_METRICS_KEY_LABEL',
      {},
      { OB_PROXY_METRICS_KEY_LABEL: 'maybe' },
      'OB_PROXY_METRICS_KEY_LABEL',
      'OB_PROXY_METRICS_KEY_LABEL must be on or off, got "maybe".',
    ],
    [
      '--max-stale within the catch-up period',
      { maxStale: '1' },
      { OB_PROXY_STORE_CATCHUP_MS: '1000' },
      'max-stale',
      "--max-stale (or OB_PROXY_MAX_STALE) (1 s) must be longer than the store's catch-up period (1 s, OB_PROXY_STORE_CATCHUP_MS).",
    ],
  ])('%s: refused, naming it', (_what, flags, env, param, message) => {
    expect(refusal(flags, env)).toEqual({ param, message });
  });
});

/**
 * Each setting of the table, where it lands in the Config and two values for it: `flag` given as
 * the flag (settings that have one) and `env` as the variable, with what each becomes; `also` is
 * what it needs beside it (the other half of the TLS pair).
 */
interface Case {
  field: keyof Config;
  flag?: [string, unknown];
  env: [string, unknown];
  bad?: string;
  also?: Env;
}
// The CLI's own settings are no part of the daemon's Config: tested apart.
const CASES: Record<Exclude<SettingName, 'debug' | 'cliTimeout' | 'waitTimeout'>, Case> = {
  home: { field: 'home', flag: ['/a', '/a'], env: ['/b', '/b'] },
  socket: { field: 'socket', flag: ['/a.sock', '/a.sock'], env: ['/b.sock', '/b.sock'] },
  store: {
    field: 'store',
    flag: ['/a.json', '/a.json'],
    env: ['postgres://db/x', 'postgres://db/x'],
    bad: 'mysql://db/x',
  },
  host: { field: 'host', flag: ['0.0.0.0', '0.0.0.0'], env: ['[::1]', '::1'], bad: 'http://0.0.0.0' },
  port: { field: 'port', flag: ['9000', 9000], env: ['0', 0], bad: '80.5' },
  maxStale: { field: 'maxStaleMs', flag: ['40', 40_000], env: ['2.5', 2500], bad: '0' },
  upstreamTimeout: { field: 'upstreamTimeoutMs', flag: ['20', 20_000], env: ['0.5', 500], bad: '-1' },
  grace: { field: 'graceMs', flag: ['0', 0], env: ['2.5', 2500], bad: 'soon' },
  bodyLimit: { field: 'bodyLimit', flag: ['2048', 2048], env: ['1024', 1024], bad: '1023' },
  bodyMemory: { field: 'bodyMemory', flag: ['33554432', 32 * MiB], env: ['1073741824', GiB], bad: '1023' },
  bodyMemoryPerKey: {
    field: 'bodyMemoryPerKey',
    flag: ['16777216', 16 * MiB],
    env: ['20971520', 20 * MiB],
    bad: '1e99',
  },
  maxFrameBytes: { field: 'maxFrameBytes', flag: ['4096', 4096], env: ['8192', 8192], bad: '1e99' },
  maxAnswerBytes: { field: 'maxAnswerBytes', flag: ['4096', 4096], env: ['8192', 8192], bad: '2048.5' },
  maxErrorBytes: { field: 'maxErrorBytes', flag: ['4096', 4096], env: ['8192', 8192], bad: 'lots' },
  responseDeadline: { field: 'responseDeadlineMs', flag: ['90', 90_000], env: ['1', 1000], bad: '0' },
  probeInterval: { field: 'probeIntervalMs', flag: ['0', 0], env: ['60', 60_000], bad: '-1' },
  packWarning: { field: 'packWarningMs', flag: ['0', 0], env: ['3600', 3_600_000], bad: '-5' },
  logLevel: { field: 'logLevel', flag: ['debug', 'debug'], env: ['silent', 'silent'], bad: 'loud' },
  logFormat: { field: 'logFormat', flag: ['pretty', 'pretty'], env: ['json', 'json'], bad: 'xml' },
  metricsPort: { field: 'metricsPort', flag: ['9464', 9464], env: ['0', 0], bad: '65536' },
  metricsHost: { field: 'metricsHost', flag: ['0.0.0.0', '0.0.0.0'], env: ['::', '::'], bad: 'a b' },
  tlsCert: {
    field: 'tls',
    flag: ['/a.pem', { cert: '/a.pem', key: '/k.pem' }],
    env: ['/b.pem', { cert: '/b.pem', key: '/k.pem' }],
    also: { OB_PROXY_TLS_KEY: '/k.pem' },
  },
  tlsKey: {
    field: 'tls',
    flag: ['/a.key', { cert: '/c.pem', key: '/a.key' }],
    env: ['/b.key', { cert: '/c.pem', key: '/b.key' }],
    also: { OB_PROXY_TLS_CERT: '/c.pem' },
  },
  socketGroup: { field: 'socketGroup', flag: ['ops', 'ops'], env: ['1001', '1001'] },
  otlpEndpoint: {
    field: 'otlp',
    flag: ['http://127.0.0.1:4318', { url: 'http://127.0.0.1:4318/v1/traces', serviceName: 'ob-proxy' }],
    env: ['https://c.example/otlp/traces', { url: 'https://c.example/otlp/traces', serviceName: 'ob-proxy' }],
  },
  otlpServiceName: {
    field: 'otlp',
    env: ['gw-eu', { url: 'http://c:4318/v1/traces', serviceName: 'gw-eu' }],
    also: { OB_PROXY_OTLP_ENDPOINT: 'http://c:4318/' },
  },
  maxConcurrency: { field: 'maxConcurrency', flag: ['4', 4], env: ['1', 1], bad: '0' },
  queue: { field: 'queueSize', flag: ['0', 0], env: ['8', 8], bad: '1.5' },
  queueTimeout: { field: 'queueTimeoutMs', flag: ['30', 30_000], env: ['1.5', 1500], bad: 'soon' },
  connectTimeout: { field: 'connectTimeoutMs', env: ['2', 2000], bad: '-3' },
  idleTimeout: { field: 'idleTimeoutMs', env: ['5', 5000], bad: 'never' },
  requestTimeout: { field: 'requestTimeoutMs', env: ['0.1', 100], bad: '0' },
  usageFlushMs: { field: 'usageFlushMs', env: ['10', 10], bad: '1' },
  badKeyLimit: { field: 'badKeyLimit', env: ['0', 0], bad: '-1' },
  maxConnections: { field: 'maxConnections', env: ['500', 500], bad: '0' },
  maxConnectionsPerAddress: { field: 'maxConnectionsPerAddress', env: ['0', 0], bad: '2.5' },
  probeTimeout: { field: 'probeTimeoutMs', env: ['0.5', 500], bad: '0' },
  corsOrigins: { field: 'corsOrigins', env: ['*', ['*']] },
  models: { field: 'models', env: [' a:1 , b:2,', ['a:1', 'b:2']] },
  metricsKeyLabel: { field: 'metricsKeyLabel', env: ['off', false], bad: 'maybe' },
  relayFastPath: { field: 'relayFastPath', env: ['0', false], bad: 'yes' },
  storeCatchupMs: { field: 'storeCatchupMs', env: ['50', 50], bad: '5' },
  limitWindowMs: { field: 'limitWindowMs', env: ['4000', 4000], bad: '99' },
  storeFoldBytes: { field: 'storeFoldBytes', env: ['8192', 8192], bad: '4095' },
  testNoNotify: { field: 'storeNotify', env: ['1', false], bad: 'yes' },
};

describe('each setting of the table: flag, then variable, then default', () => {
  it('the cases cover the table', () => {
    expect([...Object.keys(CASES), 'debug', 'cliTimeout', 'waitTimeout'].sort()).toEqual(Object.keys(SETTINGS).sort());
  });

  it("OB_PROXY_CLI_TIMEOUT: the CLI's wait for an answer, in ms", () => {
    expect(cliTimeoutMs({})).toBe(120_000);
    expect(cliTimeoutMs({ OB_PROXY_CLI_TIMEOUT: '2.5' })).toBe(2500);
    expect(cliTimeoutMs({ OB_PROXY_CLI_TIMEOUT: '' })).toBe(120_000);
    expect(() => cliTimeoutMs({ OB_PROXY_CLI_TIMEOUT: 'never' })).toThrow(
      'OB_PROXY_CLI_TIMEOUT must be a number of seconds from 0.1 to 86400, got "never".',
    );
  });

  it('--wait-timeout: the flag, then OB_PROXY_WAIT_TIMEOUT, then 2 s', () => {
    expect(waitTimeoutMs({}, {})).toBe(2000);
    expect(waitTimeoutMs({}, { OB_PROXY_WAIT_TIMEOUT: '0.5' })).toBe(500);
    expect(waitTimeoutMs({ waitTimeout: '7' }, { OB_PROXY_WAIT_TIMEOUT: '0.5' })).toBe(7000);
    expect(() => waitTimeoutMs({ waitTimeout: '0' }, {})).toThrow(
      '--wait-timeout (or OB_PROXY_WAIT_TIMEOUT) must be a number of seconds from 0.1 to 3600, got "0".',
    );
  });

  it.each(Object.entries(CASES))('%s', (name, c) => {
    const s: Setting = SETTINGS[name as SettingName];
    const also = c.also ?? {};
    // Empty is unset: the same value, or the same refusal (half a TLS pair), as not given at all.
    const outcome = (flags: ConfigFlags, env: Env): unknown => {
      try {
        return resolve(flags, env)[c.field];
      } catch (err) {
        return (err as Error).message;
      }
    };
    expect(resolve({}, { ...also, [s.env]: c.env[0] })[c.field], s.env).toEqual(c.env[1]);
    expect(outcome({}, { ...also, [s.env]: '' }), `${s.env} empty`).toEqual(outcome({}, also));
    if (c.flag !== undefined) {
      expect(s.flag, name).toBeDefined();
      expect(resolve({ [name]: c.flag[0] }, { ...also, [s.env]: c.env[0] })[c.field], `--${s.flag}`).toEqual(c.flag[1]);
      expect(resolve({ [name]: '' }, { ...also, [s.env]: c.env[0] })[c.field], `--${s.flag} empty`).toEqual(c.env[1]);
    } else {
      expect(s.flag, name).toBeUndefined();
    }
    if (c.bad !== undefined) {
      const r = refusal({}, { ...also, [s.env]: c.bad });
      expect(r.param).toBe(s.flag ?? s.env);
      expect(r.message.startsWith(`${settingLabel(s)} `), r.message).toBe(true);
      expect(r.message).toContain(`"${c.bad}"`);
    }
  });

  it('--body-memory takes a body of --body-limit, and a key its share of it', () => {
    // Derived: a quarter of --body-memory, never under --body-limit.
    expect(resolve({ bodyMemory: String(GiB) }).bodyMemoryPerKey).toBe(256 * MiB);
    expect(resolve({ bodyMemory: String(32 * MiB) }).bodyMemoryPerKey).toBe(16 * MiB);
    expect(refusal({ bodyMemory: String(8 * MiB) })).toEqual({
      param: 'body-memory',
      message:
        '--body-memory (or OB_PROXY_BODY_MEMORY) (8388608 bytes) must be at least --body-limit (or OB_PROXY_BODY_LIMIT) (16777216 bytes): otherwise a body the proxy accepts could never be held.',
    });
    expect(refusal({ bodyMemoryPerKey: String(8 * MiB) }).message).toBe(
      '--body-memory-per-key (or OB_PROXY_BODY_MEMORY_PER_KEY) (8388608 bytes) must be from --body-limit (or OB_PROXY_BODY_LIMIT) (16777216 bytes) to --body-memory (or OB_PROXY_BODY_MEMORY) (268435456 bytes).',
    );
    expect(refusal({ bodyMemoryPerKey: String(GiB) }).param).toBe('body-memory-per-key');
  });

  it('--otlp-endpoint: an http(s) URL without credentials, never echoed in its refusal', () => {
    const refused = (endpoint: string): string => refusal({}, { OB_PROXY_OTLP_ENDPOINT: endpoint }).message;
    expect(refused('collector:4318')).toBe(
      '--otlp-endpoint (or OB_PROXY_OTLP_ENDPOINT) must be an http:// or https:// URL (OTLP over HTTP), not collector:.',
    );
    expect(refused('not a url')).toBe(
      "--otlp-endpoint (or OB_PROXY_OTLP_ENDPOINT) must be the collector's URL, such as http://127.0.0.1:4318.",
    );
    const withPassword = refused('https://otel:s3cret@collector:4318');
    expect(withPassword).toBe(
      "--otlp-endpoint (or OB_PROXY_OTLP_ENDPOINT) must not hold a user or password: give the collector's credentials in OTEL_EXPORTER_OTLP_HEADERS.",
    );
    expect(refused('user:s3cret@collector')).not.toContain('s3cret');
  });

  it('home, store and socket are also what the client commands use, with nothing else read', () => {
    expect(resolvePaths({}, { OB_PROXY_PORT: 'not a port', OB_PROXY_STORE: '/s.json' }, '/home/u')).toEqual({
      home: '/home/u/.ob-proxy',
      store: '/s.json',
      socket: '/home/u/.ob-proxy/ob-proxy.sock',
    });
    expect(resolvePaths({ socket: '/f.sock' }, { OB_PROXY_HOME: '/h', OB_PROXY_SOCKET: '/e.sock' }, '/home/u')).toEqual(
      { home: '/h', store: '/h/db.json', socket: '/f.sock' },
    );
  });

  it('OB_PROXY_DEBUG: set to anything but empty', () => {
    expect([
      debugWanted({}),
      debugWanted({ OB_PROXY_DEBUG: '' }),
      debugWanted({ OB_PROXY_DEBUG: '1' }),
      debugWanted({ OB_PROXY_DEBUG: 'no' }),
    ]).toEqual([false, false, true, true]);
  });

  it("a command's own defaults (the demo logs warnings; serve's log format follows the terminal) give way to the variable and the flag", () => {
    const own = { logLevel: 'warn', logFormat: 'pretty' } as const;
    expect(resolveConfig({}, {}, '/h', own)).toMatchObject({ logLevel: 'warn', logFormat: 'pretty' });
    expect(resolveConfig({}, { OB_PROXY_LOG_LEVEL: 'error', OB_PROXY_LOG_FORMAT: 'json' }, '/h', own)).toMatchObject({
      logLevel: 'error',
      logFormat: 'json',
    });
    expect(
      resolveConfig(
        { logLevel: 'debug', logFormat: 'pretty' },
        { OB_PROXY_LOG_LEVEL: 'error', OB_PROXY_LOG_FORMAT: 'json' },
        '/h',
        own,
      ),
    ).toMatchObject({ logLevel: 'debug', logFormat: 'pretty' });
  });
});
