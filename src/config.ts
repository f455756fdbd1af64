import { join } from 'node:path';
import { DEFAULT_MODELS, parseModelList } from './domain/model-id.js';
import { obError } from './errors.js';
import { clipped } from './printable.js';
import { type AnswerLimits, DEFAULT_ANSWER_LIMITS } from './upstream/answer-limits.js';

/**
 * One setting of the daemon or the CLI, said once: the flag and variable that give it, its
 * default, how its value is read, and the line `--help` and docs/cli.md show for it. The CLI
 * builds its options from this table (cli/common.ts) and test/unit/cli-docs.test.ts holds
 * docs/cli.md to it, so a name, a default or a variable cannot drift between them.
 */
interface SettingBase {
  /** The long flag without its dashes (the key is its camelCase); absent: the environment only. */
  readonly flag?: string;
  /** The flag's value as `--help` names it. */
  readonly value?: string;
  readonly env: `OB_PROXY_${string}`;
  /** What it does, for `--help` and docs/cli.md. */
  readonly help: string;
  /** The default as people read it, where it is not a plain value (derived, or off). */
  readonly shown?: string;
  /** Set by tests, to shorten a period or reach a path; documented apart, not for operators. */
  readonly forTests?: true;
}
interface NumberSetting extends SettingBase {
  readonly type: 'number';
  readonly default: number | null;
  readonly min: number;
  readonly max: number;
  readonly integer?: true;
  readonly unit?: 'seconds' | 'milliseconds' | 'bytes';
}
interface ChoiceSetting extends SettingBase {
  readonly type: 'choice';
  readonly choices: readonly string[];
  readonly default: string | null;
}
/** A listen address: a name or an IP, not a URL (`--host http://0.0.0.0` is a common slip). */
interface AddressSetting extends SettingBase {
  readonly type: 'address';
  readonly default: string;
}
interface TextSetting extends SettingBase {
  readonly type: 'text';
  readonly shown: string;
}
export type Setting = NumberSetting | ChoiceSetting | AddressSetting | TextSetting;

const MiB = 1024 * 1024;
const GiB = 1024 ** 3;

export const SETTINGS = {
  home: {
    type: 'text',
    flag: 'home',
    value: '<dir>',
    env: 'OB_PROXY_HOME',
    shown: '~/.ob-proxy',
    help: 'ob-proxy home folder (store, socket)',
  },
  socket: {
    type: 'text',
    flag: 'socket',
    value: '<path>',
    env: 'OB_PROXY_SOCKET',
    shown: '<home>/ob-proxy.sock',
    help: 'management socket of the daemon',
  },
  store: {
    type: 'text',
    flag: 'store',
    value: '<path-or-url>',
    env: 'OB_PROXY_STORE',
    shown: '<home>/db.json',
    help: 'store file, or postgres://… shared by several daemons',
  },
  host: {
    type: 'address',
    flag: 'host',
    value: '<host>',
    env: 'OB_PROXY_HOST',
    default: '127.0.0.1',
    help: 'public listener address',
  },
  port: {
    type: 'number',
    flag: 'port',
    value: '<port>',
    env: 'OB_PROXY_PORT',
    default: 8080,
    min: 0,
    max: 65535,
    integer: true,
    help: 'public listener port',
  },
  maxStale: {
    type: 'number',
    flag: 'max-stale',
    value: '<seconds>',
    env: 'OB_PROXY_MAX_STALE',
    default: 30,
    min: 1,
    max: 86400,
    unit: 'seconds',
    help: 'with postgres://: refuse keys when out of sync with it for longer',
  },
  upstreamTimeout: {
    type: 'number',
    flag: 'upstream-timeout',
    value: '<seconds>',
    env: 'OB_PROXY_UPSTREAM_TIMEOUT',
    default: DEFAULT_ANSWER_LIMITS.upstreamTimeoutMs / 1000,
    min: 0.001,
    max: 86400,
    unit: 'seconds',
    help: 'wait for model server headers / between chunks',
  },
  grace: {
    type: 'number',
    flag: 'grace',
    value: '<seconds>',
    env: 'OB_PROXY_GRACE',
    default: 30,
    min: 0,
    max: 86400,
    unit: 'seconds',
    help: 'on SIGTERM, time for in-flight requests to finish',
  },
  bodyLimit: {
    type: 'number',
    flag: 'body-limit',
    value: '<bytes>',
    env: 'OB_PROXY_BODY_LIMIT',
    default: 16 * MiB,
    min: 1024,
    max: GiB,
    integer: true,
    unit: 'bytes',
    help: 'largest request body',
  },
  maxFrameBytes: {
    type: 'number',
    flag: 'max-frame-bytes',
    value: '<bytes>',
    env: 'OB_PROXY_MAX_FRAME_BYTES',
    default: DEFAULT_ANSWER_LIMITS.maxFrameBytes,
    min: 1024,
    max: GiB,
    integer: true,
    unit: 'bytes',
    help: 'largest SSE event from a model server',
  },
  maxAnswerBytes: {
    type: 'number',
    flag: 'max-answer-bytes',
    value: '<bytes>',
    env: 'OB_PROXY_MAX_ANSWER_BYTES',
    default: DEFAULT_ANSWER_LIMITS.maxAnswerBytes,
    min: 1024,
    max: GiB,
    integer: true,
    unit: 'bytes',
    help: 'largest non-streaming answer from a model server',
  },
  maxErrorBytes: {
    type: 'number',
    flag: 'max-error-bytes',
    value: '<bytes>',
    env: 'OB_PROXY_MAX_ERROR_BYTES',
    default: DEFAULT_ANSWER_LIMITS.maxErrorBytes,
    min: 1024,
    max: GiB,
    integer: true,
    unit: 'bytes',
    help: 'largest error body from a model server',
  },
  responseDeadline: {
    type: 'number',
    flag: 'response-deadline',
    value: '<seconds>',
    env: 'OB_PROXY_RESPONSE_DEADLINE',
    default: DEFAULT_ANSWER_LIMITS.responseDeadlineMs / 1000,
    min: 1,
    max: 7 * 86400,
    unit: 'seconds',
    help: "longest a model server's whole answer may take",
  },
  probeInterval: {
    type: 'number',
    flag: 'probe-interval',
    value: '<seconds>',
    env: 'OB_PROXY_PROBE_INTERVAL',
    default: 15,
    min: 0,
    max: 86400,
    unit: 'seconds',
    help: "ask each ready instance's model server for its models this often; 0: never",
  },
  logLevel: {
    type: 'choice',
    flag: 'log-level',
    value: '<level>',
    env: 'OB_PROXY_LOG_LEVEL',
    choices: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'],
    default: 'info',
    help: 'fatal, error, warn, info, debug, trace or silent',
  },
  logFormat: {
    type: 'choice',
    flag: 'log-format',
    value: '<format>',
    env: 'OB_PROXY_LOG_FORMAT',
    choices: ['json', 'pretty'],
    default: null,
    shown: 'pretty on a terminal, json otherwise',
    help: 'json (for machines) or pretty (for people)',
  },
  metricsPort: {
    type: 'number',
    flag: 'metrics-port',
    value: '<port>',
    env: 'OB_PROXY_METRICS_PORT',
    default: null,
    shown: 'off',
    min: 0,
    max: 65535,
    integer: true,
    help: 'serve Prometheus metrics on this port (never the public port)',
  },
  metricsHost: {
    type: 'address',
    flag: 'metrics-host',
    value: '<host>',
    env: 'OB_PROXY_METRICS_HOST',
    default: '127.0.0.1',
    help: 'address of the metrics listener',
  },
  otlpEndpoint: {
    type: 'text',
    flag: 'otlp-endpoint',
    value: '<url>',
    env: 'OB_PROXY_OTLP_ENDPOINT',
    shown: 'off',
    help: 'send a trace span per request to this OpenTelemetry collector (OTLP over HTTP, e.g. http://127.0.0.1:4318)',
  },
  tlsCert: {
    type: 'text',
    flag: 'tls-cert',
    value: '<file>',
    env: 'OB_PROXY_TLS_CERT',
    shown: 'none: plain HTTP',
    help: 'serve the public listener over HTTPS with this PEM certificate (chain); reloaded on SIGHUP',
  },
  tlsKey: {
    type: 'text',
    flag: 'tls-key',
    value: '<file>',
    env: 'OB_PROXY_TLS_KEY',
    shown: 'none',
    help: "the certificate's PEM private key; reloaded on SIGHUP",
  },
  socketGroup: {
    type: 'text',
    flag: 'socket-group',
    value: '<group>',
    env: 'OB_PROXY_SOCKET_GROUP',
    shown: 'none: the owner only, mode 0600',
    help: 'let this group use the management socket (mode 0660); its members are operators',
  },
  maxConcurrency: {
    type: 'number',
    flag: 'max-concurrency',
    value: '<n>',
    env: 'OB_PROXY_MAX_CONCURRENCY',
    default: null,
    shown: 'no limit',
    min: 1,
    max: 100_000,
    integer: true,
    help: 'per instance: requests sent to its model server at once; the rest wait in its queue',
  },
  queue: {
    type: 'number',
    flag: 'queue',
    value: '<n>',
    env: 'OB_PROXY_QUEUE',
    default: 100,
    min: 0,
    max: 100_000,
    integer: true,
    help: 'per instance, with --max-concurrency: requests that may wait, served round robin between keys',
  },
  queueTimeout: {
    type: 'number',
    flag: 'queue-timeout',
    value: '<seconds>',
    env: 'OB_PROXY_QUEUE_TIMEOUT',
    default: 60,
    min: 0.001,
    max: 3600,
    unit: 'seconds',
    help: 'longest a request waits in the queue before 429',
  },

  connectTimeout: {
    type: 'number',
    env: 'OB_PROXY_CONNECT_TIMEOUT',
    default: 10,
    min: 0.001,
    max: 3600,
    unit: 'seconds',
    help: 'longest a connection to a model server may take',
  },
  // A loading model can be silent for minutes between chunks too: same default as time-to-headers.
  idleTimeout: {
    type: 'number',
    env: 'OB_PROXY_IDLE_TIMEOUT',
    default: null,
    shown: 'the upstream time-out',
    min: 0.001,
    max: 86400,
    unit: 'seconds',
    help: "longest silence between a model server's body chunks",
  },
  requestTimeout: {
    type: 'number',
    env: 'OB_PROXY_REQUEST_TIMEOUT',
    default: 120,
    min: 0.1,
    max: 3600,
    unit: 'seconds',
    help: 'a client must have sent its whole request within this time',
  },
  usageFlushMs: {
    type: 'number',
    env: 'OB_PROXY_USAGE_FLUSH_MS',
    default: 5000,
    min: 10,
    max: 3_600_000,
    unit: 'milliseconds',
    help: 'usage counters are written to the store this often',
  },
  badKeyLimit: {
    type: 'number',
    env: 'OB_PROXY_BAD_KEY_LIMIT',
    default: 30,
    min: 0,
    max: 1_000_000,
    integer: true,
    help: 'bad keys per address per minute before 429; 0 turns it off',
  },
  maxConnections: {
    type: 'number',
    env: 'OB_PROXY_MAX_CONNECTIONS',
    default: null,
    shown: 'half of (the descriptor limit - 128)',
    min: 1,
    max: 1_000_000,
    integer: true,
    help: 'connections open at once on the public port; more are closed as they arrive',
  },
  maxConnectionsPerAddress: {
    type: 'number',
    env: 'OB_PROXY_MAX_CONNECTIONS_PER_ADDRESS',
    default: null,
    shown: 'half of the connection cap',
    min: 0,
    max: 1_000_000,
    integer: true,
    help: 'connections open at once from one address (IPv6: one /64); 0 turns it off',
  },
  probeTimeout: {
    type: 'number',
    env: 'OB_PROXY_PROBE_TIMEOUT',
    default: 5,
    min: 0.1,
    max: 600,
    unit: 'seconds',
    help: 'a health probe (connect and answer) gives up after this long',
  },
  cliTimeout: {
    type: 'number',
    env: 'OB_PROXY_CLI_TIMEOUT',
    default: 120,
    min: 0.1,
    max: 86400,
    unit: 'seconds',
    help: 'a CLI command gives up on a daemon that has not answered within this time (exit 3)',
  },
  corsOrigins: {
    type: 'text',
    env: 'OB_PROXY_CORS_ORIGINS',
    shown: 'none: CORS off',
    help: 'browser origins allowed by CORS, comma-separated, or *',
  },
  models: {
    type: 'text',
    env: 'OB_PROXY_MODELS',
    shown: DEFAULT_MODELS.join(','),
    help: 'the model ids instances may run, comma-separated',
  },
  metricsKeyLabel: {
    type: 'choice',
    env: 'OB_PROXY_METRICS_KEY_LABEL',
    choices: ['on', 'off'],
    default: 'on',
    help: 'label request and token metrics with the key id (off for very many keys)',
  },
  relayFastPath: {
    type: 'choice',
    env: 'OB_PROXY_RELAY_FAST_PATH',
    choices: ['0', '1'],
    default: '1',
    help: 'stream events of a learned layout are relayed as bytes; 0 decodes, parses and encodes every event again',
  },
  storeCatchupMs: {
    type: 'number',
    env: 'OB_PROXY_STORE_CATCHUP_MS',
    // Half a second: with a notification lost, the change still reaches every daemon within the
    // 1 s that docs/contract.md §4 promises (one period plus one read).
    default: 500,
    min: 50,
    max: 600_000,
    integer: true,
    unit: 'milliseconds',
    help: 'PostgreSQL store: its change log is read this often, notified or not',
  },
  otlpServiceName: {
    type: 'text',
    env: 'OB_PROXY_OTLP_SERVICE_NAME',
    shown: 'ob-proxy',
    help: "with --otlp-endpoint: the spans' service.name",
  },
  debug: {
    type: 'text',
    env: 'OB_PROXY_DEBUG',
    shown: 'unset',
    help: 'set to anything: a CLI command that fails unexpectedly prints the stack trace after its error line',
  },

  // Not a flag: a minute is what rpm and tpm mean. Tests shorten it so a client's retry after
  // the window passes is seconds, not a minute.
  limitWindowMs: {
    type: 'number',
    env: 'OB_PROXY_LIMIT_WINDOW_MS',
    default: 60_000,
    min: 100,
    max: 3_600_000,
    integer: true,
    unit: 'milliseconds',
    forTests: true,
    help: 'the window of per-key rpm and tpm limits',
  },
  storeFoldBytes: {
    type: 'number',
    env: 'OB_PROXY_STORE_FOLD_BYTES',
    default: null,
    shown: "db.json's own size, at least 1 MiB",
    min: 4096,
    max: GiB,
    integer: true,
    unit: 'bytes',
    forTests: true,
    help: 'lowdb store: the journal is folded into db.json at this size',
  },
  testNoNotify: {
    type: 'choice',
    env: 'OB_PROXY_TEST_NO_NOTIFY',
    choices: ['0', '1'],
    default: '0',
    forTests: true,
    help: "PostgreSQL store: 1 drops LISTEN, so other daemons' changes arrive by the catch-up read alone",
  },
} as const satisfies Record<string, Setting>;

export type SettingName = keyof typeof SETTINGS;
type NamesOf<T> = { [K in SettingName]: (typeof SETTINGS)[K] extends T ? K : never }[SettingName];
/** The settings that are also flags, by commander's name for them. */
export type FlagName = NamesOf<{ flag: string }>;
export type ConfigFlags = { [K in FlagName]?: string | number };
export type Env = Readonly<Record<string, string | undefined>>;

/** Resolved once at startup; flag, then environment, then default (docs/contract.md §1). */
export interface Config extends AnswerLimits {
  home: string;
  socket: string;
  store: string;
  host: string;
  port: number;
  // upstreamTimeoutMs and idleTimeoutMs (AnswerLimits): the idle time defaults to the upstream time-out.
  connectTimeoutMs: number;
  /** A client must have sent its whole request within this time (slow senders are cut off). */
  requestTimeoutMs: number;
  graceMs: number;
  bodyLimit: number;
  models: string[];
  logLevel: string;
  usageFlushMs: number;
  badKeyLimit: number;
  /** Connections open at once on the public port; null: derived from the descriptor limit. */
  maxConnections: number | null;
  /** Connections open at once from one address; null: half of maxConnections; 0: no cap. */
  maxConnectionsPerAddress: number | null;
  /** Browser origins allowed by CORS; empty = CORS off, ['*'] = any origin. */
  corsOrigins: string[];
  /** Prometheus metrics listener: off (null) unless a port is given; never the public port. */
  metricsPort: number | null;
  metricsHost: string;
  /** Label request and token series with the key id (off for very many keys). */
  metricsKeyLabel: boolean;
  /**
   * OpenTelemetry traces: where spans are sent (the OTLP/HTTP traces URL, `/v1/traces` added to
   * a bare origin) and under which service name; null: tracing off, and its SDK never loaded.
   */
  otlp: { url: string; serviceName: string } | null;
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

/** Defaults a command sets apart from serve's (the demo logs warnings only). */
export interface CommandDefaults {
  logLevel?: string;
  logFormat?: 'json' | 'pretty';
}

/** The value given, flag first, then variable; an empty one counts as not given. */
export function givenValue(name: SettingName, flags: ConfigFlags, env: Env): string | undefined {
  const s: Setting = SETTINGS[name];
  const flag =
    s.flag === undefined ? undefined : (flags as Readonly<Record<string, string | number | undefined>>)[name];
  if (flag !== undefined && flag !== '') return String(flag);
  const raw = env[s.env];
  return raw === undefined || raw === '' ? undefined : raw;
}

/**
 * How an error names a setting: the flag and the variable that also sets it, as the operator may
 * have used either (`--port (or OB_PROXY_PORT)`); a setting read from the environment only is
 * named by its variable.
 */
export function settingLabel(s: Setting): string {
  return s.flag === undefined ? s.env : `--${s.flag} (or ${s.env})`;
}

function refuse(s: Setting, message: string): never {
  throw obError('invalid_argument', { param: s.flag ?? s.env, message });
}

/** The default as `--help` and docs/cli.md say it. */
export function shownDefault(s: Setting): string {
  if (s.shown !== undefined) return s.shown;
  if (s.type === 'text') return '';
  if (s.type !== 'number' || s.default === null) return String(s.default);
  const n = s.default;
  if (s.unit === 'bytes') return n % MiB === 0 ? `${n / MiB} MiB` : n % 1024 === 0 ? `${n / 1024} KiB` : `${n} bytes`;
  if (s.unit === 'seconds') return `${n} s`;
  if (s.unit === 'milliseconds') return `${n} ms`;
  return String(n);
}

function readNumber(s: NumberSetting, raw: string | undefined): number | null {
  if (raw === undefined) return s.default;
  const n = raw.trim() === '' ? NaN : Number(raw);
  if (!Number.isFinite(n) || n < s.min || n > s.max || (s.integer === true && !Number.isInteger(n))) {
    const unit = s.unit === undefined ? '' : ` of ${s.unit}`;
    refuse(
      s,
      `${settingLabel(s)} must be a number${unit} from ${s.min} to ${s.max}${s.integer === true ? ', without a fraction' : ''}, got "${clipped(raw)}".`,
    );
  }
  return n;
}

function readChoice(s: ChoiceSetting, raw: string | undefined, fallback = s.default): string | null {
  if (raw === undefined) return fallback;
  if (!s.choices.includes(raw)) {
    const choices = s.choices.length === 2 ? `${s.choices[0]} or ${s.choices[1]}` : `one of ${s.choices.join(', ')}`;
    refuse(s, `${settingLabel(s)} must be ${choices}, got "${clipped(raw)}".`);
  }
  return raw;
}

function readAddress(s: AddressSetting, raw: string | undefined): string {
  if (raw === undefined) return s.default;
  if (!/^(\[[0-9A-Fa-f:.%\w]+\]|[0-9A-Za-z.:%_-]+)$/.test(raw)) {
    refuse(
      s,
      `${settingLabel(s)} must be an address to listen on, such as 127.0.0.1, 0.0.0.0 or ::, got "${clipped(raw)}".`,
    );
  }
  return raw.startsWith('[') ? raw.slice(1, -1) : raw;
}

/**
 * A Unix socket's path is at most 107 bytes on Linux (108 with its NUL) and 103 elsewhere. Node
 * cuts a longer one short without a word and binds or connects to what is left: a daemon with a
 * deep --home put its socket beside the home (in /tmp, say), then stopped on a bare ENOENT, and the
 * CLI said the daemon refused the connection. The refusal for such a path, or null.
 */
export function socketPathProblem(path: string, platform: string): string | null {
  const max = platform === 'linux' ? 107 : 103;
  const bytes = Buffer.byteLength(path);
  if (bytes <= max) return null;
  return `The socket path ${path} is ${bytes} bytes long; a Unix socket's path may be at most ${max}. Give ${settingLabel(SETTINGS.socket)} a shorter path (e.g. /run/ob-proxy/ob-proxy.sock), or a shorter --home.`;
}

/** Where the files are: what the client commands need, with no other setting read (or refused). */
export function resolvePaths(flags: ConfigFlags, env: Env, homedir: string): Pick<Config, 'home' | 'store' | 'socket'> {
  const home = givenValue('home', flags, env) ?? join(homedir, '.ob-proxy');
  return {
    home,
    store: givenValue('store', flags, env) ?? join(home, 'db.json'),
    socket: givenValue('socket', flags, env) ?? join(home, 'ob-proxy.sock'),
  };
}

/** OB_PROXY_CLI_TIMEOUT: how long a client command waits for the daemon's whole answer (ms). */
export function cliTimeoutMs(env: Env): number {
  return readNumber(SETTINGS.cliTimeout, givenValue('cliTimeout', {}, env))! * 1000;
}

/** OB_PROXY_DEBUG: the CLI adds a stack trace to an unexpected error's line. */
export function debugWanted(env: Env): boolean {
  return givenValue('debug', {}, env) !== undefined;
}

export function resolveConfig(flags: ConfigFlags, env: Env, homedir: string, defaults: CommandDefaults = {}): Config {
  const num = (name: NamesOf<NumberSetting>): number | null => readNumber(SETTINGS[name], givenValue(name, flags, env));
  const seconds = (name: NamesOf<NumberSetting>): number => num(name)! * 1000;
  const choice = (name: NamesOf<ChoiceSetting>, fallback?: string): string =>
    readChoice(SETTINGS[name], givenValue(name, flags, env), fallback)!;
  const text = (name: SettingName): string | undefined => givenValue(name, flags, env);

  const paths = resolvePaths(flags, env, homedir);
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(paths.store) && !/^postgres(ql)?:\/\//i.test(paths.store)) {
    refuse(
      SETTINGS.store,
      `${settingLabel(SETTINGS.store)} "${paths.store.split('@').pop()}" is not supported: use a lowdb file path (default <home>/db.json) or a postgres:// URL.`,
    );
  }
  const maxStaleMs = seconds('maxStale');
  const storeCatchupMs = num('storeCatchupMs')!;
  // In sync means a catch-up read succeeded: a bound shorter than their period would refuse
  // every key all the time.
  if (maxStaleMs <= storeCatchupMs) {
    refuse(
      SETTINGS.maxStale,
      `${settingLabel(SETTINGS.maxStale)} (${maxStaleMs / 1000} s) must be longer than the store's catch-up period (${storeCatchupMs / 1000} s, ${SETTINGS.storeCatchupMs.env}).`,
    );
  }
  const upstreamTimeoutMs = seconds('upstreamTimeout');
  const idle = num('idleTimeout');
  const logFormat = readChoice(
    SETTINGS.logFormat,
    text('logFormat'),
    defaults.logFormat ?? null,
  ) as Config['logFormat'];
  const maxConcurrency = num('maxConcurrency');
  return {
    ...paths,
    host: readAddress(SETTINGS.host, text('host')),
    port: num('port')!,
    upstreamTimeoutMs,
    connectTimeoutMs: seconds('connectTimeout'),
    idleTimeoutMs: idle === null ? upstreamTimeoutMs : idle * 1000,
    requestTimeoutMs: seconds('requestTimeout'),
    graceMs: seconds('grace'),
    bodyLimit: num('bodyLimit')!,
    maxFrameBytes: num('maxFrameBytes')!,
    maxAnswerBytes: num('maxAnswerBytes')!,
    maxErrorBytes: num('maxErrorBytes')!,
    responseDeadlineMs: seconds('responseDeadline'),
    models: parseModelList(text('models')) ?? [...DEFAULT_MODELS],
    logLevel: choice('logLevel', defaults.logLevel),
    usageFlushMs: num('usageFlushMs')!,
    badKeyLimit: num('badKeyLimit')!,
    maxConnections: num('maxConnections'),
    maxConnectionsPerAddress: num('maxConnectionsPerAddress'),
    maxStaleMs,
    storeCatchupMs,
    storeNotify: choice('testNoNotify') !== '1',
    storeFoldBytes: num('storeFoldBytes'),
    corsOrigins: (text('corsOrigins') ?? '')
      .split(',')
      .map((o) => o.trim().replace(/\/$/, ''))
      .filter((o) => o !== ''),
    metricsPort: num('metricsPort'),
    metricsHost: readAddress(SETTINGS.metricsHost, text('metricsHost')),
    metricsKeyLabel: choice('metricsKeyLabel') === 'on',
    logFormat,
    relayFastPath: choice('relayFastPath') === '1',
    tls: tlsConfig(text('tlsCert'), text('tlsKey')),
    otlp: otlpConfig(text('otlpEndpoint'), text('otlpServiceName')),
    socketGroup: text('socketGroup') ?? null,
    maxConcurrency,
    queueSize: num('queue')!,
    queueTimeoutMs: seconds('queueTimeout'),
    limitWindowMs: num('limitWindowMs')!,
    probeIntervalMs: seconds('probeInterval'),
    probeTimeoutMs: seconds('probeTimeout'),
  };
}

function tlsConfig(cert: string | undefined, key: string | undefined): Config['tls'] {
  if (cert === undefined && key === undefined) return null;
  if (cert === undefined || key === undefined) {
    const missing = cert === undefined ? SETTINGS.tlsCert : SETTINGS.tlsKey;
    refuse(
      missing,
      `--${SETTINGS.tlsCert.flag} and --${SETTINGS.tlsKey.flag} go together: ${settingLabel(missing)} is missing.`,
    );
  }
  return { cert, key };
}

/**
 * The collector's traces URL: http or https only, a bare origin taking OTLP's `/v1/traces` as
 * `OTEL_EXPORTER_OTLP_ENDPOINT` does, any other path used as given. A URL with a user or a
 * password is refused: it would be logged and kept in the process's configuration in clear
 * (a collector that needs credentials takes them in `OTEL_EXPORTER_OTLP_HEADERS`).
 */
function otlpConfig(endpoint: string | undefined, serviceName: string | undefined): Config['otlp'] {
  if (endpoint === undefined) return null;
  const s = SETTINGS.otlpEndpoint;
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    refuse(s, `${settingLabel(s)} must be the collector's URL, such as http://127.0.0.1:4318.`);
  }
  if (url.username !== '' || url.password !== '')
    refuse(
      s,
      `${settingLabel(s)} must not hold a user or password: give the collector's credentials in OTEL_EXPORTER_OTLP_HEADERS.`,
    );
  // The scheme only: what follows it may be a password written without one.
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    refuse(s, `${settingLabel(s)} must be an http:// or https:// URL (OTLP over HTTP), not ${clipped(url.protocol)}.`);
  if (url.pathname === '/' || url.pathname === '') url.pathname = '/v1/traces';
  return { url: url.href, serviceName: serviceName ?? 'ob-proxy' };
}
