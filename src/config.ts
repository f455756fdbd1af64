import { DEFAULT_MODELS } from './domain/model-id.js';
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
  /** A flag of the commands that talk to the daemon only, not of `serve`. */
  readonly clientOnly?: true;
}
export interface NumberSetting extends SettingBase {
  readonly type: 'number';
  readonly default: number | null;
  readonly min: number;
  readonly max: number;
  readonly integer?: true;
  readonly unit?: 'seconds' | 'milliseconds' | 'bytes';
}
export interface ChoiceSetting extends SettingBase {
  readonly type: 'choice';
  readonly choices: readonly string[];
  readonly default: string | null;
}
/** A listen address: a name or an IP, not a URL (`--host http://0.0.0.0` is a common slip). */
export interface AddressSetting extends SettingBase {
  readonly type: 'address';
  readonly default: string;
}
export interface TextSetting extends SettingBase {
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
  // Each held body costs about its size in RSS once it waits (one copy kept), so the daemon's
  // bound is its baseline plus about this much (docs/reliability.md): 256 MiB holds sixteen
  // bodies at the default --body-limit at once, or thousands of ordinary conversations.
  bodyMemory: {
    type: 'number',
    flag: 'body-memory',
    value: '<bytes>',
    env: 'OB_PROXY_BODY_MEMORY',
    default: 256 * MiB,
    min: 1024,
    max: 64 * GiB,
    integer: true,
    unit: 'bytes',
    help: 'request bodies held at once (waiting for the queue or the model server); more get 503; at least --body-limit',
  },
  // A quarter: one key can never take more than a quarter of the daemon's room for bodies.
  bodyMemoryPerKey: {
    type: 'number',
    flag: 'body-memory-per-key',
    value: '<bytes>',
    env: 'OB_PROXY_BODY_MEMORY_PER_KEY',
    default: null,
    shown: 'a quarter of --body-memory, at least --body-limit',
    min: 1024,
    max: 64 * GiB,
    integer: true,
    unit: 'bytes',
    help: "one key's share of --body-memory; more get 429; from --body-limit to --body-memory",
  },
  // Half: the keys of one instance (one customer, however many keys it makes) leave at least
  // half of the daemon's room for bodies to the others.
  bodyMemoryPerInstance: {
    type: 'number',
    flag: 'body-memory-per-instance',
    value: '<bytes>',
    env: 'OB_PROXY_BODY_MEMORY_PER_INSTANCE',
    default: null,
    shown: 'half of --body-memory, at least --body-memory-per-key',
    min: 1024,
    max: 64 * GiB,
    integer: true,
    unit: 'bytes',
    help: "the share of --body-memory of one instance's keys together; more get 429; from --body-memory-per-key to --body-memory",
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
  packWarning: {
    type: 'number',
    flag: 'pack-warning',
    value: '<seconds>',
    env: 'OB_PROXY_PACK_WARNING',
    default: 900,
    min: 0,
    max: 30 * 86400,
    unit: 'seconds',
    help: 'this long before a pack ends, its keys are told it ends soon (GET /v1/models, a header); 0: never',
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
  probeRate: {
    type: 'number',
    flag: 'probe-rate',
    value: '<n>',
    env: 'OB_PROXY_PROBE_RATE',
    default: 25,
    min: 1,
    max: 100_000,
    integer: true,
    help: 'health probes started per second at most, spread over the round: a round of N instances takes at least N / this seconds',
  },
  probeConcurrency: {
    type: 'number',
    flag: 'probe-concurrency',
    value: '<n>',
    env: 'OB_PROXY_PROBE_CONCURRENCY',
    default: 16,
    min: 1,
    max: 10_000,
    integer: true,
    help: 'health probes waiting on their model servers at once, at most',
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
  usageLog: {
    type: 'text',
    flag: 'usage-log',
    value: '<file>',
    env: 'OB_PROXY_USAGE_LOG',
    shown: 'off',
    help: 'write a JSON line per request to this file, for billing (key id, instance, route, model, tokens, status, duration; never a secret or a prompt)',
  },
  usageLogMaxBytes: {
    type: 'number',
    flag: 'usage-log-max-bytes',
    value: '<bytes>',
    env: 'OB_PROXY_USAGE_LOG_MAX_BYTES',
    default: 100 * MiB,
    min: 1024,
    max: 64 * GiB,
    integer: true,
    unit: 'bytes',
    help: 'with --usage-log: the file is rotated (renamed <file>.1) before it grows past this size',
  },
  usageLogFiles: {
    type: 'number',
    flag: 'usage-log-files',
    value: '<n>',
    env: 'OB_PROXY_USAGE_LOG_FILES',
    default: 5,
    min: 1,
    max: 1000,
    integer: true,
    help: 'with --usage-log: rotated files kept (<file>.1 the newest); the oldest is deleted',
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
  // A few seconds, as web servers give a body against slow senders: a body is held in the
  // budget only as its bytes arrive, and this frees its connection once they stop.
  bodyTimeout: {
    type: 'number',
    env: 'OB_PROXY_BODY_TIMEOUT',
    default: 10,
    min: 0.1,
    max: 3600,
    unit: 'seconds',
    help: "a request body's first byte must come within this time of its headers, and each next within this time of the last",
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
  // An agent keeps one socket per conversation; sub-agents add a few.
  socketsPerKey: {
    type: 'number',
    env: 'OB_PROXY_SOCKETS_PER_KEY',
    default: 8,
    min: 0,
    max: 100_000,
    integer: true,
    help: 'Responses WebSockets one key may keep open; more upgrades get 429; 0 turns WebSocket mode off',
  },
  // Between an agent's turns its tools run, minutes at times; a closed socket costs one resend in full.
  socketIdleTimeout: {
    type: 'number',
    env: 'OB_PROXY_SOCKET_IDLE_TIMEOUT',
    default: 600,
    min: 0.01,
    max: 86400,
    unit: 'seconds',
    help: 'a Responses WebSocket with no response under way is closed after this long without a message',
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
  waitTimeout: {
    type: 'number',
    flag: 'wait-timeout',
    value: '<seconds>',
    env: 'OB_PROXY_WAIT_TIMEOUT',
    clientOnly: true,
    default: 2,
    min: 0.1,
    max: 3600,
    unit: 'seconds',
    help: 'with --wait: longest a command that revokes waits for every daemon of the store to confirm it',
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
    help: 'the model ids instances may run until `ob-proxy models` stores a list, comma-separated',
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
  // A spawned daemon cannot be held by an injected dependency: a test that must act while it
  // starts (send a signal, say) holds it here instead of racing its start-up.
  testStartGate: {
    type: 'text',
    env: 'OB_PROXY_TEST_START_GATE',
    shown: 'unset',
    forTests: true,
    help: 'a file: serve holds its start-up, its signal handlers in and its store not opened, until the file exists',
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
export type NamesOf<T> = { [K in SettingName]: (typeof SETTINGS)[K] extends T ? K : never }[SettingName];
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
  /** A body's first byte, and each next one, must come within this time (a stalled body is ended: 408). */
  bodyTimeoutMs: number;
  graceMs: number;
  bodyLimit: number;
  /** Bytes of request bodies held at once (ByteBudget), in all, per instance and per key; each at least bodyLimit. */
  bodyMemory: number;
  bodyMemoryPerInstance: number;
  bodyMemoryPerKey: number;
  models: string[];
  logLevel: string;
  usageFlushMs: number;
  badKeyLimit: number;
  /** Connections open at once on the public port; null: derived from the descriptor limit. */
  maxConnections: number | null;
  /** Connections open at once from one address; null: half of maxConnections; 0: no cap. */
  maxConnectionsPerAddress: number | null;
  /** Responses WebSockets one key may keep open (0: WebSocket mode off). */
  socketsPerKey: number;
  /** A Responses WebSocket with nothing under way is closed after this long without a message. */
  socketIdleTimeoutMs: number;
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
  /** A JSON line per request for billing systems, rotated by size; null: off. */
  usageLog: { path: string; maxBytes: number; files: number } | null;
  /** JSON lines for machines, pino-pretty for people; null: pretty on a terminal, JSON otherwise. */
  logFormat: 'json' | 'pretty' | null;
  /** Tests: start-up waits, once the home is checked, until this file exists; null: no wait. */
  testStartGate: string | null;
  /** A shared store (PostgreSQL): keys are refused once out of sync with it for longer than this. */
  maxStaleMs: number;
  /** A shared store: how often the change log is read whether or not a notification came. */
  storeCatchupMs: number;
  /** A shared store: LISTEN for change notifications (off only to test the catch-up read alone). */
  storeNotify: boolean;
  /** File store: fold the journal of commits into db.json at this size (bytes); null: db.json's own size, at least 1 MiB. */
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
  probeRate: number;
  probeConcurrency: number;
  /** How long before a pack's end its keys' answers say it ends soon (0: never). */
  packWarningMs: number;
  /** A probe (connect and answer) gives up after this long. */
  probeTimeoutMs: number;
}

/** Defaults a command sets apart from serve's (the demo logs warnings only). */
export interface CommandDefaults {
  logLevel?: string;
  logFormat?: 'json' | 'pretty';
}
