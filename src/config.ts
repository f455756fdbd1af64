import { join } from 'node:path';
import { DEFAULT_MODELS, parseModelList } from './domain/model-id.js';
import { obError } from './errors.js';
import { type AnswerLimits, DEFAULT_ANSWER_LIMITS } from './upstream/answer-limits.js';

/** Resolved once at startup; flag, then environment, then default (CONTRACT §1). */
export interface Config extends AnswerLimits {
  home: string;
  socket: string;
  store: string;
  host: string;
  port: number;
  upstreamTimeoutMs: number;
  connectTimeoutMs: number;
  /** Longest silence between upstream body chunks (streaming or not); defaults to upstreamTimeoutMs. */
  idleTimeoutMs: number;
  /** A client must have sent its whole request within this time (slow senders are cut off). */
  requestTimeoutMs: number;
  graceMs: number;
  bodyLimit: number;
  models: string[];
  logLevel: string;
  usageFlushMs: number;
  badKeyLimit: number;
  /** Browser origins allowed by CORS; empty = CORS off, ['*'] = any origin. */
  corsOrigins: string[];
  /** Prometheus metrics listener: off (null) unless a port is given; never the public port. */
  metricsPort: number | null;
  metricsHost: string;
  /** Label request and token series with the key id (off for very many keys). */
  metricsKeyLabel: boolean;
  /** JSON lines for machines, pino-pretty for people; null: pretty on a terminal, JSON otherwise. */
  logFormat: 'json' | 'pretty' | null;
  /** A shared store (PostgreSQL): keys are refused once out of sync with it for longer than this. */
  maxStaleMs: number;
  /** A shared store: how often the change log is read whether or not a notification came. */
  storeCatchupMs: number;
  /** A shared store: LISTEN for change notifications (off only to test the catch-up read alone). */
  storeNotify: boolean;
  /** lowdb: fold the journal of commits into db.json at this size (bytes); null: db.json's own size, at least 1 MiB. */
  storeFoldBytes: number | null;
  /**
   * Stream events may skip decoding and JSON.parse when they match a learned layout. Off, every
   * event is decoded, parsed and encoded again: for an operator who suspects the fast path, and
   * for tests that hold both paths to the same answer.
   */
  relayFastPath: boolean;
  /** PEM files for HTTPS on the public listener (both or neither); read again on SIGHUP. */
  tls: { cert: string; key: string } | null;
  /** A group whose members may use the management socket (mode 0660); null: owner only (0600). */
  socketGroup: string | null;
  /** Per instance: requests sent to its model server at once (null: no admission control). */
  maxConcurrency: number | null;
  /** Per instance: requests waiting for a slot beyond maxConcurrency; more get 429. */
  queueSize: number;
  /** How long a request may wait in an instance's queue before it gets 429. */
  queueTimeoutMs: number;
  /** The window of per-key rpm and tpm limits: a minute (shorter only for tests). */
  limitWindowMs: number;
  /** Each ready instance's model server is asked for its models this often; 0: never. */
  probeIntervalMs: number;
  /** A probe (connect and answer) gives up after this long. */
  probeTimeoutMs: number;
}

export interface ConfigFlags {
  home?: string;
  socket?: string;
  store?: string;
  host?: string;
  port?: string | number;
  upstreamTimeout?: string | number;
  grace?: string | number;
  bodyLimit?: string | number;
  logLevel?: string;
  maxFrameBytes?: string | number;
  maxAnswerBytes?: string | number;
  maxErrorBytes?: string | number;
  /** Seconds. */
  responseDeadline?: string | number;
  metricsHost?: string;
  metricsPort?: string | number;
  logFormat?: string;
  /** Seconds. */
  maxStale?: string | number;
  tlsCert?: string;
  tlsKey?: string;
  socketGroup?: string;
  maxConcurrency?: string | number;
  queue?: string | number;
  /** Seconds. */
  queueTimeout?: string | number;
  /** Seconds. */
  probeInterval?: string | number;
}

export type Env = Readonly<Record<string, string | undefined>>;

function pick(flag: string | number | undefined, env: string | undefined): string | undefined {
  if (flag !== undefined && flag !== '') return String(flag);
  if (env !== undefined && env !== '') return env;
  return undefined;
}

/**
 * How an error names a setting: the flag and the variable that also sets it, as the operator may
 * have used either (`--port (or OB_PROXY_PORT)`); a setting read from the environment only is
 * named by its variable.
 */
function flag(name: string): string {
  return `--${name} (or OB_PROXY_${name.replace(/-/g, '_').toUpperCase()})`;
}

function paramOf(label: string): string {
  return label.startsWith('--') ? label.slice(2).split(' ')[0]! : label;
}

function number(label: string, raw: string | undefined, fallback: number, opts: { min: number; max: number; integer?: boolean; unit?: string }): number {
  if (raw === undefined) return fallback;
  const n = raw.trim() === '' ? NaN : Number(raw);
  if (!Number.isFinite(n) || n < opts.min || n > opts.max || (opts.integer === true && !Number.isInteger(n))) {
    const unit = opts.unit === undefined ? '' : ` of ${opts.unit}`;
    throw obError('invalid_argument', { param: paramOf(label), message: `${label} must be a number${unit} from ${opts.min} to ${opts.max}${opts.integer === true ? ', without a fraction' : ''}, got "${raw}".` });
  }
  return n;
}

function onOff(label: string, raw: string | undefined, fallback: boolean): boolean {
  if (raw === undefined || raw === '') return fallback;
  if (raw === '1') return true;
  if (raw === '0') return false;
  throw obError('invalid_argument', { param: paramOf(label), message: `${label} must be 0 or 1, got "${raw}".` });
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

function logLevel(raw: string | undefined): string {
  if (raw === undefined) return 'info';
  if (!LOG_LEVELS.includes(raw)) throw obError('invalid_argument', { param: 'log-level', message: `${flag('log-level')} must be one of ${LOG_LEVELS.join(', ')}, got "${raw}".` });
  return raw;
}

/** A listen address: a name or an IP, not a URL (`--host http://0.0.0.0` is a common slip). */
function host(raw: string | undefined, label: string, fallback: string): string {
  if (raw === undefined) return fallback;
  if (!/^(\[[0-9A-Fa-f:.%\w]+\]|[0-9A-Za-z.:%_-]+)$/.test(raw)) {
    throw obError('invalid_argument', { param: paramOf(label), message: `${label} must be an address to listen on, such as 127.0.0.1, 0.0.0.0 or ::, got "${raw}".` });
  }
  return raw.startsWith('[') ? raw.slice(1, -1) : raw;
}

export function resolveConfig(flags: ConfigFlags, env: Env, homedir: string): Config {
  const home = pick(flags.home, env.OB_PROXY_HOME) ?? join(homedir, '.ob-proxy');
  const store = pick(flags.store, env.OB_PROXY_STORE) ?? join(home, 'db.json');
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(store) && !/^postgres(ql)?:\/\//i.test(store)) {
    throw obError('invalid_argument', { param: 'store', message: `${flag('store')} "${store.split('@').pop()}" is not supported: use a lowdb file path (default <home>/db.json) or a postgres:// URL.` });
  }
  const maxStaleMs = number(flag('max-stale'), pick(flags.maxStale, env.OB_PROXY_MAX_STALE), 30, { min: 1, max: 86400, unit: 'seconds' }) * 1000;
  const storeCatchupMs = number('OB_PROXY_STORE_CATCHUP_MS', env.OB_PROXY_STORE_CATCHUP_MS, 2000, { min: 50, max: 600_000, integer: true, unit: 'milliseconds' });
  // In sync means a catch-up read succeeded: a bound shorter than their period would refuse
  // every key all the time.
  if (maxStaleMs <= storeCatchupMs) {
    throw obError('invalid_argument', { param: 'max-stale', message: `${flag('max-stale')} (${maxStaleMs / 1000} s) must be longer than the store's catch-up period (${storeCatchupMs / 1000} s, OB_PROXY_STORE_CATCHUP_MS).` });
  }
  return {
    home,
    store,
    socket: pick(flags.socket, env.OB_PROXY_SOCKET) ?? join(home, 'ob-proxy.sock'),
    host: host(pick(flags.host, env.OB_PROXY_HOST), flag('host'), '127.0.0.1'),
    port: number(flag('port'), pick(flags.port, env.OB_PROXY_PORT), 8080, { min: 0, max: 65535, integer: true }),
    upstreamTimeoutMs: number(flag('upstream-timeout'), pick(flags.upstreamTimeout, env.OB_PROXY_UPSTREAM_TIMEOUT), 300, { min: 0.001, max: 86400, unit: 'seconds' }) * 1000,
    connectTimeoutMs: number('OB_PROXY_CONNECT_TIMEOUT', env.OB_PROXY_CONNECT_TIMEOUT, 10, { min: 0.001, max: 3600, unit: 'seconds' }) * 1000,
    // A loading model can be silent for minutes between chunks too: same default as time-to-headers.
    idleTimeoutMs: number('OB_PROXY_IDLE_TIMEOUT', pick(env.OB_PROXY_IDLE_TIMEOUT, pick(flags.upstreamTimeout, env.OB_PROXY_UPSTREAM_TIMEOUT)), 300, { min: 0.001, max: 86400, unit: 'seconds' }) * 1000,
    requestTimeoutMs: number('OB_PROXY_REQUEST_TIMEOUT', env.OB_PROXY_REQUEST_TIMEOUT, 120, { min: 0.1, max: 3600, unit: 'seconds' }) * 1000,
    graceMs: number(flag('grace'), pick(flags.grace, env.OB_PROXY_GRACE), 30, { min: 0, max: 86400, unit: 'seconds' }) * 1000,
    bodyLimit: number(flag('body-limit'), pick(flags.bodyLimit, env.OB_PROXY_BODY_LIMIT), 16 * 1024 * 1024, { min: 1024, max: 1024 ** 3, integer: true, unit: 'bytes' }),
    maxFrameBytes: number(flag('max-frame-bytes'), pick(flags.maxFrameBytes, env.OB_PROXY_MAX_FRAME_BYTES), DEFAULT_ANSWER_LIMITS.maxFrameBytes, { min: 1024, max: 1024 ** 3, integer: true, unit: 'bytes' }),
    maxAnswerBytes: number(flag('max-answer-bytes'), pick(flags.maxAnswerBytes, env.OB_PROXY_MAX_ANSWER_BYTES), DEFAULT_ANSWER_LIMITS.maxAnswerBytes, { min: 1024, max: 1024 ** 3, integer: true, unit: 'bytes' }),
    maxErrorBytes: number(flag('max-error-bytes'), pick(flags.maxErrorBytes, env.OB_PROXY_MAX_ERROR_BYTES), DEFAULT_ANSWER_LIMITS.maxErrorBytes, { min: 1024, max: 1024 ** 3, integer: true, unit: 'bytes' }),
    responseDeadlineMs: number(flag('response-deadline'), pick(flags.responseDeadline, env.OB_PROXY_RESPONSE_DEADLINE), DEFAULT_ANSWER_LIMITS.responseDeadlineMs / 1000, { min: 1, max: 7 * 86400, unit: 'seconds' }) * 1000,
    models: parseModelList(env.OB_PROXY_MODELS) ?? [...DEFAULT_MODELS],
    logLevel: logLevel(pick(flags.logLevel, env.OB_PROXY_LOG_LEVEL)),
    usageFlushMs: number('OB_PROXY_USAGE_FLUSH_MS', env.OB_PROXY_USAGE_FLUSH_MS, 5000, { min: 10, max: 3_600_000, unit: 'milliseconds' }),
    badKeyLimit: number('OB_PROXY_BAD_KEY_LIMIT', env.OB_PROXY_BAD_KEY_LIMIT, 30, { min: 0, max: 1_000_000, integer: true }),
    maxStaleMs,
    storeCatchupMs,
    storeNotify: env.OB_PROXY_TEST_NO_NOTIFY !== '1',
    storeFoldBytes: env.OB_PROXY_STORE_FOLD_BYTES === undefined || env.OB_PROXY_STORE_FOLD_BYTES === '' ? null
      : number('OB_PROXY_STORE_FOLD_BYTES', env.OB_PROXY_STORE_FOLD_BYTES, 0, { min: 4096, max: 1024 ** 3, integer: true, unit: 'bytes' }),
    corsOrigins: (env.OB_PROXY_CORS_ORIGINS ?? '').split(',').map((o) => o.trim().replace(/\/$/, '')).filter((o) => o !== ''),
    ...metricsConfig(flags, env),
    logFormat: logFormat(pick(flags.logFormat, env.OB_PROXY_LOG_FORMAT)),
    relayFastPath: onOff('OB_PROXY_RELAY_FAST_PATH', env.OB_PROXY_RELAY_FAST_PATH, true),
    tls: tlsConfig(flags, env),
    socketGroup: pick(flags.socketGroup, env.OB_PROXY_SOCKET_GROUP) ?? null,
    ...admissionConfig(flags, env),
    probeIntervalMs: number(flag('probe-interval'), pick(flags.probeInterval, env.OB_PROXY_PROBE_INTERVAL), 15, { min: 0, max: 86400, unit: 'seconds' }) * 1000,
    probeTimeoutMs: number('OB_PROXY_PROBE_TIMEOUT', env.OB_PROXY_PROBE_TIMEOUT, 5, { min: 0.1, max: 600, unit: 'seconds' }) * 1000,
  };
}

function admissionConfig(flags: ConfigFlags, env: Env): Pick<Config, 'maxConcurrency' | 'queueSize' | 'queueTimeoutMs' | 'limitWindowMs'> {
  const max = pick(flags.maxConcurrency, env.OB_PROXY_MAX_CONCURRENCY);
  return {
    maxConcurrency: max === undefined ? null : number(flag('max-concurrency'), max, 0, { min: 1, max: 100_000, integer: true }),
    queueSize: number(flag('queue'), pick(flags.queue, env.OB_PROXY_QUEUE), 100, { min: 0, max: 100_000, integer: true }),
    queueTimeoutMs: number(flag('queue-timeout'), pick(flags.queueTimeout, env.OB_PROXY_QUEUE_TIMEOUT), 60, { min: 0.001, max: 3600, unit: 'seconds' }) * 1000,
    // Not a flag: a minute is what rpm and tpm mean. Tests shorten it so a client's retry after
    // the window passes is seconds, not a minute.
    limitWindowMs: number('OB_PROXY_LIMIT_WINDOW_MS', env.OB_PROXY_LIMIT_WINDOW_MS, 60_000, { min: 100, max: 3_600_000, integer: true }),
  };
}

function tlsConfig(flags: ConfigFlags, env: Env): Config['tls'] {
  const cert = pick(flags.tlsCert, env.OB_PROXY_TLS_CERT);
  const key = pick(flags.tlsKey, env.OB_PROXY_TLS_KEY);
  if (cert === undefined && key === undefined) return null;
  if (cert === undefined || key === undefined) {
    const missing = cert === undefined ? 'tls-cert' : 'tls-key';
    throw obError('invalid_argument', { param: missing, message: `--tls-cert and --tls-key go together: --${missing} (or OB_PROXY_${missing.replace('-', '_').toUpperCase()}) is missing.` });
  }
  return { cert, key };
}

function metricsConfig(flags: ConfigFlags, env: Env): Pick<Config, 'metricsPort' | 'metricsHost' | 'metricsKeyLabel'> {
  const port = pick(flags.metricsPort, env.OB_PROXY_METRICS_PORT);
  const keyLabel = env.OB_PROXY_METRICS_KEY_LABEL ?? 'on';
  if (!['on', 'off'].includes(keyLabel)) {
    throw obError('invalid_argument', { param: 'metrics-key-label', message: `OB_PROXY_METRICS_KEY_LABEL must be on or off, got "${keyLabel}".` });
  }
  return {
    metricsPort: port === undefined ? null : number(flag('metrics-port'), port, 0, { min: 0, max: 65535, integer: true }),
    metricsHost: host(pick(flags.metricsHost, env.OB_PROXY_METRICS_HOST), flag('metrics-host'), '127.0.0.1'),
    metricsKeyLabel: keyLabel === 'on',
  };
}

function logFormat(raw: string | undefined): Config['logFormat'] {
  if (raw === undefined) return null;
  if (raw !== 'json' && raw !== 'pretty') throw obError('invalid_argument', { param: 'log-format', message: `${flag('log-format')} must be json or pretty, got "${raw}".` });
  return raw;
}
