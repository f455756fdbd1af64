/**
 * resolveConfig, in process: flag, then environment, then default (docs/contract.md §1), each bad value a
 * usage error naming the flag and the variable that set it. The spawned-process table in
 * test/e2e/serve-usage-errors.test.ts checks that these reach the terminal as exit 2.
 */
import { describe, expect, it } from 'vitest';
import type { Config, ConfigFlags, Env } from '../../src/config.js';
import { MiB, refusal, resolve } from '../helpers/config-resolve.js';

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
  bodyTimeoutMs: 10_000,
  graceMs: 30_000,
  bodyLimit: 16 * 1024 * 1024,
  bodyMemory: 256 * MiB,
  bodyMemoryPerKey: 64 * MiB,
  bodyMemoryPerInstance: 128 * MiB,
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
  socketsPerKey: 8,
  socketIdleTimeoutMs: 600_000,
  maxStaleMs: 30_000,
  storeCatchupMs: 500,
  storeFoldBytes: null,
  storeNotify: true,
  testStartGate: null,
  corsOrigins: [],
  metricsPort: null,
  metricsHost: '127.0.0.1',
  metricsKeyLabel: true,
  logFormat: null,
  relayFastPath: true,
  tls: null,
  otlp: null,
  usageLog: null,
  socketGroup: null,
  maxConcurrency: null,
  queueSize: 100,
  queueTimeoutMs: 60_000,
  limitWindowMs: 60_000,
  probeIntervalMs: 15_000,
  probeRate: 25,
  probeConcurrency: 16,
  probeTimeoutMs: 5000,
  packWarningMs: 900_000,
};

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
