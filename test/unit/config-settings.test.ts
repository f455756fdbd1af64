/**
 * Each setting of SETTINGS, in process: its variable, then its flag (where it has one), each
 * empty value as unset, and a bad value refused naming the flag or the variable; the CLI's own
 * settings, the paths the client commands read, and the values one setting derives from another.
 */
import { describe, expect, it } from 'vitest';
import { type Config, type ConfigFlags, type Env, SETTINGS, type Setting, type SettingName } from '../../src/config.js';
import { cliTimeoutMs, debugWanted, resolveConfig, resolvePaths, waitTimeoutMs } from '../../src/config-resolve.js';
import { settingLabel } from '../../src/config-read.js';
import { GiB, MiB, refusal, resolve } from '../helpers/config-resolve.js';

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
  bodyMemoryPerInstance: {
    field: 'bodyMemoryPerInstance',
    flag: ['134217728', 128 * MiB],
    env: ['100663296', 96 * MiB],
    bad: '1e99',
  },
  maxFrameBytes: { field: 'maxFrameBytes', flag: ['4096', 4096], env: ['8192', 8192], bad: '1e99' },
  maxAnswerBytes: { field: 'maxAnswerBytes', flag: ['4096', 4096], env: ['8192', 8192], bad: '2048.5' },
  maxErrorBytes: { field: 'maxErrorBytes', flag: ['4096', 4096], env: ['8192', 8192], bad: 'lots' },
  responseDeadline: { field: 'responseDeadlineMs', flag: ['90', 90_000], env: ['1', 1000], bad: '0' },
  probeInterval: { field: 'probeIntervalMs', flag: ['0', 0], env: ['60', 60_000], bad: '-1' },
  probeRate: { field: 'probeRate', flag: ['200', 200], env: ['5', 5], bad: '0' },
  probeConcurrency: { field: 'probeConcurrency', flag: ['4', 4], env: ['64', 64], bad: '1.5' },
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
  usageLog: {
    field: 'usageLog',
    flag: ['/var/log/a.jsonl', { path: '/var/log/a.jsonl', maxBytes: 100 * MiB, files: 5 }],
    env: ['b.jsonl', { path: 'b.jsonl', maxBytes: 100 * MiB, files: 5 }],
  },
  usageLogMaxBytes: {
    field: 'usageLog',
    flag: ['4096', { path: '/u.jsonl', maxBytes: 4096, files: 5 }],
    env: ['1024', { path: '/u.jsonl', maxBytes: 1024, files: 5 }],
    bad: '1023',
    also: { OB_PROXY_USAGE_LOG: '/u.jsonl' },
  },
  usageLogFiles: {
    field: 'usageLog',
    flag: ['1', { path: '/u.jsonl', maxBytes: 100 * MiB, files: 1 }],
    env: ['30', { path: '/u.jsonl', maxBytes: 100 * MiB, files: 30 }],
    bad: '0',
    also: { OB_PROXY_USAGE_LOG: '/u.jsonl' },
  },
  maxConcurrency: { field: 'maxConcurrency', flag: ['4', 4], env: ['1', 1], bad: '0' },
  queue: { field: 'queueSize', flag: ['0', 0], env: ['8', 8], bad: '1.5' },
  queueTimeout: { field: 'queueTimeoutMs', flag: ['30', 30_000], env: ['1.5', 1500], bad: 'soon' },
  connectTimeout: { field: 'connectTimeoutMs', env: ['2', 2000], bad: '-3' },
  idleTimeout: { field: 'idleTimeoutMs', env: ['5', 5000], bad: 'never' },
  requestTimeout: { field: 'requestTimeoutMs', env: ['0.1', 100], bad: '0' },
  bodyTimeout: { field: 'bodyTimeoutMs', env: ['2.5', 2500], bad: '0' },
  usageFlushMs: { field: 'usageFlushMs', env: ['10', 10], bad: '1' },
  badKeyLimit: { field: 'badKeyLimit', env: ['0', 0], bad: '-1' },
  maxConnections: { field: 'maxConnections', env: ['500', 500], bad: '0' },
  maxConnectionsPerAddress: { field: 'maxConnectionsPerAddress', env: ['0', 0], bad: '2.5' },
  socketsPerKey: { field: 'socketsPerKey', env: ['0', 0], bad: '-1' },
  socketIdleTimeout: { field: 'socketIdleTimeoutMs', env: ['0.5', 500], bad: '0' },
  probeTimeout: { field: 'probeTimeoutMs', env: ['0.5', 500], bad: '0' },
  corsOrigins: { field: 'corsOrigins', env: ['*', ['*']] },
  models: { field: 'models', env: [' a:1 , b:2,', ['a:1', 'b:2']] },
  metricsKeyLabel: { field: 'metricsKeyLabel', env: ['off', false], bad: 'maybe' },
  relayFastPath: { field: 'relayFastPath', env: ['0', false], bad: 'yes' },
  storeCatchupMs: { field: 'storeCatchupMs', env: ['50', 50], bad: '5' },
  limitWindowMs: { field: 'limitWindowMs', env: ['4000', 4000], bad: '99' },
  storeFoldBytes: { field: 'storeFoldBytes', env: ['8192', 8192], bad: '4095' },
  testNoNotify: { field: 'storeNotify', env: ['1', false], bad: 'yes' },
  testStartGate: { field: 'testStartGate', env: ['/tmp/gate', '/tmp/gate'] },
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

  it('--body-memory takes a body of --body-limit, and a key and an instance their shares of it', () => {
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
    // An instance's share: half of --body-memory, never under a key's.
    expect(resolve({ bodyMemory: String(GiB) }).bodyMemoryPerInstance).toBe(512 * MiB);
    expect(resolve({ bodyMemory: String(32 * MiB) }).bodyMemoryPerInstance).toBe(16 * MiB);
    expect(refusal({ bodyMemoryPerInstance: String(32 * MiB) }).message).toBe(
      '--body-memory-per-instance (or OB_PROXY_BODY_MEMORY_PER_INSTANCE) (33554432 bytes) must be from --body-memory-per-key (or OB_PROXY_BODY_MEMORY_PER_KEY) (67108864 bytes) to --body-memory (or OB_PROXY_BODY_MEMORY) (268435456 bytes).',
    );
    expect(refusal({ bodyMemoryPerInstance: String(GiB) }).param).toBe('body-memory-per-instance');
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
