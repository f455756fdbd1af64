import { join } from 'node:path';
import {
  type ChoiceSetting,
  type CommandDefaults,
  type Config,
  type ConfigFlags,
  type Env,
  type NamesOf,
  type NumberSetting,
  SETTINGS,
  type SettingName,
} from './config.js';
import { givenValue, readAddress, readChoice, readNumber, refuse, settingLabel } from './config-read.js';
import { DEFAULT_MODELS, MODEL_ID_RULE, isModelId, parseModelList } from './domain/model-id.js';
import { clipped } from './printable.js';
import { isPostgresUrl } from './store/store-url.js';

/** The whole Config from flags, environment and defaults, every value checked against the others. */

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

/** `--wait`'s bound: the flag, else OB_PROXY_WAIT_TIMEOUT, else 2 s. */
export function waitTimeoutMs(flags: { waitTimeout?: string }, env: Env): number {
  return readNumber(SETTINGS.waitTimeout, givenValue('waitTimeout', flags, env))! * 1000;
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
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(paths.store) && !isPostgresUrl(paths.store)) {
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
  const memory = bodyMemory(
    num('bodyLimit')!,
    num('bodyMemory')!,
    num('bodyMemoryPerKey'),
    num('bodyMemoryPerInstance'),
  );
  return {
    ...paths,
    host: readAddress(SETTINGS.host, text('host')),
    port: num('port')!,
    upstreamTimeoutMs,
    connectTimeoutMs: seconds('connectTimeout'),
    idleTimeoutMs: idle === null ? upstreamTimeoutMs : idle * 1000,
    requestTimeoutMs: seconds('requestTimeout'),
    bodyTimeoutMs: seconds('bodyTimeout'),
    graceMs: seconds('grace'),
    bodyLimit: num('bodyLimit')!,
    ...memory,
    maxFrameBytes: num('maxFrameBytes')!,
    maxAnswerBytes: num('maxAnswerBytes')!,
    maxErrorBytes: num('maxErrorBytes')!,
    responseDeadlineMs: seconds('responseDeadline'),
    models: startModels(text('models')),
    logLevel: choice('logLevel', defaults.logLevel),
    usageFlushMs: num('usageFlushMs')!,
    badKeyLimit: num('badKeyLimit')!,
    maxConnections: num('maxConnections'),
    maxConnectionsPerAddress: num('maxConnectionsPerAddress'),
    socketsPerKey: num('socketsPerKey')!,
    socketIdleTimeoutMs: seconds('socketIdleTimeout'),
    maxStaleMs,
    storeCatchupMs,
    storeNotify: choice('testNoNotify') !== '1',
    storeFoldBytes: num('storeFoldBytes'),
    testStartGate: text('testStartGate') ?? null,
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
    usageLog: usageLogConfig(text('usageLog'), num('usageLogMaxBytes')!, num('usageLogFiles')!),
    socketGroup: text('socketGroup') ?? null,
    maxConcurrency,
    queueSize: num('queue')!,
    queueTimeoutMs: seconds('queueTimeout'),
    limitWindowMs: num('limitWindowMs')!,
    probeIntervalMs: seconds('probeInterval'),
    probeRate: num('probeRate')!,
    probeConcurrency: num('probeConcurrency')!,
    packWarningMs: seconds('packWarning'),
    probeTimeoutMs: seconds('probeTimeout'),
  };
}

/**
 * The bounds on held bodies: each must take one body of --body-limit, a key's within its
 * instance's, and an instance's within the daemon's.
 */
function bodyMemory(
  bodyLimit: number,
  daemon: number,
  perKey: number | null,
  perInstance: number | null,
): Pick<Config, 'bodyMemory' | 'bodyMemoryPerKey' | 'bodyMemoryPerInstance'> {
  if (daemon < bodyLimit)
    refuse(
      SETTINGS.bodyMemory,
      `${settingLabel(SETTINGS.bodyMemory)} (${daemon} bytes) must be at least ${settingLabel(SETTINGS.bodyLimit)} (${bodyLimit} bytes): otherwise a body the proxy accepts could never be held.`,
    );
  if (perKey !== null && (perKey < bodyLimit || perKey > daemon))
    refuse(
      SETTINGS.bodyMemoryPerKey,
      `${settingLabel(SETTINGS.bodyMemoryPerKey)} (${perKey} bytes) must be from ${settingLabel(SETTINGS.bodyLimit)} (${bodyLimit} bytes) to ${settingLabel(SETTINGS.bodyMemory)} (${daemon} bytes).`,
    );
  const key = perKey ?? Math.max(bodyLimit, Math.floor(daemon / 4));
  if (perInstance !== null && (perInstance < key || perInstance > daemon))
    refuse(
      SETTINGS.bodyMemoryPerInstance,
      `${settingLabel(SETTINGS.bodyMemoryPerInstance)} (${perInstance} bytes) must be from ${settingLabel(SETTINGS.bodyMemoryPerKey)} (${key} bytes) to ${settingLabel(SETTINGS.bodyMemory)} (${daemon} bytes).`,
    );
  return {
    bodyMemory: daemon,
    bodyMemoryPerKey: key,
    bodyMemoryPerInstance: perInstance ?? Math.max(key, Math.floor(daemon / 2)),
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

/**
 * The models this daemon allows until the store holds a list (`ob-proxy models`), which is then
 * written from this one: so each id must be one the store takes.
 */
function startModels(value: string | undefined): string[] {
  const models = parseModelList(value) ?? [...DEFAULT_MODELS];
  const bad = models.find((m) => !isModelId(m));
  if (bad !== undefined || models.length === 0)
    refuse(
      SETTINGS.models,
      `${settingLabel(SETTINGS.models)} must be model ids separated by commas, each ${MODEL_ID_RULE}${bad === undefined ? '' : `; "${clipped(bad)}" is not`}.`,
    );
  return models;
}

/** The usage log's file and rotation; null when no file is given (off, the default). */
function usageLogConfig(path: string | undefined, maxBytes: number, files: number): Config['usageLog'] {
  return path === undefined ? null : { path, maxBytes, files };
}
