import type { Instance } from '../src/domain/instance.js';
import type { AuditEvent, KeyLimits } from '../src/domain/key.js';
import type { StoreData } from '../src/store/store.js';
import { socketPathProblem } from '../src/config-resolve.js';
import { ObProxyError, isErrorCode, obError } from '../src/errors.js';
import type { ConfirmationView } from '../src/services/revocation-confirmation.js';
import type { LiveStatsView } from '../src/services/live-stats.js';
import type { UsageReport, UsageReportPage } from '../src/wire/usage-report.js';
import type { UsageBucketsReport } from '../src/wire/usage-buckets-report.js';
import type {
  AddedView,
  InstanceView,
  KeyPageView,
  KeyView,
  KeyWithSecret,
  ModelsView,
  ReadyView,
  RevocationPageView,
  RevocationView,
  RevokedKeyView,
  RotatedKeyView,
  StatusView,
} from '../src/wire/views.js';
import { type SocketResponse, socketRequest } from './socket-http.js';

export type HaltAction = 'pending' | 'stop' | 'fail' | 'terminate';

/**
 * The one client of the management API, used by every CLI command and by the console.
 * Connection failures become `daemon_unreachable` (exit 3); the daemon's refusals come back as
 * the ObProxyError it sent. One connection per call, over a small HTTP/1.1 client of its own
 * (socket-http.ts): every CLI command loads this file, and undici or node:http took longer to
 * load than the rest of a command.
 */
export class DaemonClient {
  /**
   * Longest wait for a whole answer (OB_PROXY_CLI_TIMEOUT). A daemon stopped with Ctrl-Z, or
   * stuck on its disk, still accepts connections (the kernel does): without a bound a command,
   * or a script's cron job, waited for ever. The event stream (follow) is not bounded by it.
   */
  timeoutMs = 120_000;

  constructor(readonly socketPath: string) {}

  private silent(): ObProxyError {
    return obError('daemon_unreachable', {
      message: `The ob-proxy daemon at ${this.socketPath} did not answer within ${this.timeoutMs / 1000} s (OB_PROXY_CLI_TIMEOUT): is it stopped (Ctrl-Z in its terminal, SIGSTOP) or stuck on its store? What was asked may still be done once it answers: check with \`ob-proxy status\` and the list commands before repeating it.`,
    });
  }

  private unreachable(err: unknown): ObProxyError {
    const tooLong = socketPathProblem(this.socketPath, process.platform);
    if (tooLong !== null) return obError('daemon_unreachable', { message: tooLong, cause: err });
    return obError('daemon_unreachable', {
      message: `Cannot reach the ob-proxy daemon at ${this.socketPath} (${(err as { code?: string }).code ?? (err as Error).message}). Start it with \`ob-proxy serve\`, or pass the right --home/--socket.`,
      cause: err,
    });
  }

  async call<T>(method: 'GET' | 'POST' | 'DELETE', path: string, body?: unknown): Promise<T> {
    let text: string;
    let status: number;
    const deadline = AbortSignal.timeout(this.timeoutMs);
    try {
      const res = await socketRequest(
        this.socketPath,
        method,
        path,
        body === undefined ? undefined : JSON.stringify(body),
        deadline,
      );
      status = res.status;
      const chunks: Buffer[] = [];
      for await (const chunk of res.body) chunks.push(chunk);
      text = Buffer.concat(chunks).toString('utf8');
    } catch (err) {
      throw deadline.aborted ? this.silent() : this.unreachable(err);
    }
    let parsed: unknown;
    try {
      parsed = text === '' ? null : JSON.parse(text);
    } catch {
      throw obError('internal_error', { message: `The daemon sent an unreadable answer (HTTP ${status}).` });
    }
    if (status >= 400) throw refusal(status, parsed);
    return parsed as T;
  }

  /**
   * A whole list as JSON lines (`format=lines`), each line handed on as it arrives: a list of a
   * million records is never one string on either side of the socket.
   */
  async lines(path: string, onLine: (line: string) => void): Promise<void> {
    const deadline = AbortSignal.timeout(this.timeoutMs);
    let res: SocketResponse;
    try {
      res = await socketRequest(this.socketPath, 'GET', path, undefined, deadline);
    } catch (err) {
      throw deadline.aborted ? this.silent() : this.unreachable(err);
    }
    const utf8 = new TextDecoder();
    let buf = '';
    try {
      for await (const chunk of res.body) {
        buf += utf8.decode(chunk, { stream: true });
        if (res.status >= 400) continue;
        let from = 0;
        let at: number;
        while ((at = buf.indexOf('\n', from)) !== -1) {
          onLine(buf.slice(from, at));
          from = at + 1;
        }
        buf = buf.slice(from);
      }
    } catch (err) {
      throw deadline.aborted ? this.silent() : this.unreachable(err);
    } finally {
      res.destroy();
    }
    if (res.status >= 400) {
      let parsed: unknown = null;
      try {
        parsed = JSON.parse(buf);
      } catch {
        // An unreadable refusal is still a refusal.
      }
      throw refusal(res.status, parsed);
    }
    if (buf !== '') onLine(buf);
  }

  status(): Promise<StatusView> {
    return this.call('GET', '/v1/status');
  }
  backup(): Promise<{ store: string; data: StoreData }> {
    return this.call('GET', '/v1/store/backup');
  }
  listInstances(state?: string): Promise<InstanceView[]> {
    return this.call('GET', `/v1/instances${state === undefined ? '' : `?state=${encodeURIComponent(state)}`}`);
  }
  getInstance(id: string): Promise<InstanceView> {
    return this.call('GET', `/v1/instances/${encodeURIComponent(id)}`);
  }
  addInstance(input: {
    id: string;
    model: string;
    endpoint?: string | undefined;
    packEndsAt?: string | undefined;
    upstreamTokenFile?: string | undefined;
  }): Promise<AddedView> {
    return this.call('POST', '/v1/instances', input);
  }
  ready(
    id: string,
    options: { endpoint?: string | undefined; upstreamTokenFile?: string | undefined; wait: boolean; probe?: boolean },
  ): Promise<ReadyView> {
    return this.call('POST', `/v1/instances/${encodeURIComponent(id)}/ready`, options);
  }
  move(id: string, action: HaltAction): Promise<InstanceView> {
    return this.call('POST', `/v1/instances/${encodeURIComponent(id)}/${action}`, {});
  }
  /** `shorten` only when asked: a daemon from before it refuses the field, and no CLI call needs to send it otherwise. */
  extend(id: string, packEndsAt: string, shorten = false): Promise<InstanceView> {
    return this.call(
      'POST',
      `/v1/instances/${encodeURIComponent(id)}/extend`,
      shorten ? { packEndsAt, shorten } : { packEndsAt },
    );
  }
  /** `add` aliases, `remove` some or `clear` them all: the instance after. Fields not given are not sent. */
  alias(id: string, change: { add?: string[]; remove?: string[]; clear?: boolean }): Promise<InstanceView> {
    return this.call('POST', `/v1/instances/${encodeURIComponent(id)}/aliases`, change);
  }
  remove(id: string): Promise<InstanceView> {
    return this.call('DELETE', `/v1/instances/${encodeURIComponent(id)}`);
  }
  models(): Promise<ModelsView> {
    return this.call('GET', '/v1/models');
  }
  /** `allow` ids to add, `disallow` ids to take away: the list after. Fields not given are not sent. */
  changeModels(change: { allow?: string[]; disallow?: string[] }): Promise<ModelsView> {
    return this.call('POST', '/v1/models', change);
  }
  listKeys(instance?: string): Promise<KeyView[]> {
    return this.call('GET', `/v1/keys${instance === undefined ? '' : `?instance=${encodeURIComponent(instance)}`}`);
  }
  /** One page of keys by creation: `after` is the `next` of the page before. */
  keyPage(q: PageQuery & { status?: 'active' | 'revoked' | undefined }): Promise<KeyPageView> {
    return this.call('GET', `/v1/keys?${query(q)}`);
  }
  /** Every key (of the filter), one JSON line each, as the daemon sends them. */
  keyLines(
    q: { instance?: string | undefined; status?: 'active' | 'revoked' | undefined },
    onLine: (line: string) => void,
  ): Promise<void> {
    return this.lines(`/v1/keys?${query({ ...q, format: 'lines' })}`, onLine);
  }
  /** One page of revocations by time: `after` is the `next` of the page before. */
  revocationPage(q: PageQuery): Promise<RevocationPageView> {
    return this.call('GET', `/v1/revocations?${query(q)}`);
  }
  revocationLines(q: { instance?: string | undefined }, onLine: (line: string) => void): Promise<void> {
    return this.lines(`/v1/revocations?${query({ ...q, format: 'lines' })}`, onLine);
  }
  createKey(instance: string, name: string, limits?: Partial<KeyLimits>): Promise<KeyWithSecret> {
    return this.call('POST', '/v1/keys', { instance, name, ...(limits === undefined ? {} : { limits }) });
  }
  /** Fields absent are kept, null removes the limit. */
  setKeyLimits(id: string, limits: Partial<KeyLimits>): Promise<KeyView> {
    return this.call('POST', `/v1/keys/${encodeURIComponent(id)}/limits`, limits);
  }
  getKey(id: string): Promise<KeyView> {
    return this.call('GET', `/v1/keys/${encodeURIComponent(id)}`);
  }
  /** The key of this id; undefined when there is none (to ask about it before a change). */
  async findKey(id: string): Promise<KeyView | undefined> {
    try {
      return await this.getKey(id);
    } catch (err) {
      if (err instanceof ObProxyError && err.code === 'key_not_found') return undefined;
      throw err;
    }
  }
  /** `graceSeconds` only when given: 0 and absent both revoke the old key at once. */
  rotateKey(id: string, graceSeconds?: number): Promise<RotatedKeyView> {
    return this.call(
      'POST',
      `/v1/keys/${encodeURIComponent(id)}/rotate`,
      graceSeconds === undefined ? {} : { graceSeconds },
    );
  }
  revokeKey(id: string): Promise<RevokedKeyView> {
    return this.call('POST', `/v1/keys/${encodeURIComponent(id)}/revoke`, {});
  }
  /** Whether every live daemon of the store has applied these revocations (`instance`: all its revoked keys). */
  confirmations(target: { keys?: readonly string[]; instance?: string }): Promise<ConfirmationView> {
    const q = [
      ...(target.keys === undefined ? [] : [`keys=${encodeURIComponent(target.keys.join(','))}`]),
      ...(target.instance === undefined ? [] : [`instance=${encodeURIComponent(target.instance)}`]),
    ].join('&');
    return this.call('GET', `/v1/confirmations${q === '' ? '' : `?${q}`}`);
  }
  revealKey(id: string): Promise<KeyWithSecret> {
    return this.call('POST', `/v1/keys/${encodeURIComponent(id)}/reveal`, {});
  }
  usage(filter: {
    instance?: string | undefined;
    key?: string | undefined;
    since?: string | undefined;
  }): Promise<UsageReport> {
    const q = Object.entries(filter)
      .filter(([, v]) => v !== undefined)
      .map(([k, v]) => `${k}=${encodeURIComponent(v as string)}`)
      .join('&');
    return this.call('GET', `/v1/usage${q === '' ? '' : `?${q}`}`);
  }
  /** A page of the report: the packs of up to `limit` keys after `after`, in the order of `keyPage`. */
  usagePage(
    filter: { instance?: string | undefined; key?: string | undefined; since?: string | undefined } & PageQuery,
  ): Promise<UsageReportPage> {
    return this.call('GET', `/v1/usage?${query(filter)}`);
  }
  /** Every key's usage with its pack, one JSON line each, as the daemon sends them. */
  usageLines(
    filter: { instance?: string | undefined; key?: string | undefined; since?: string | undefined },
    onLine: (line: string) => void,
  ): Promise<void> {
    return this.lines(`/v1/usage?${query({ ...filter, format: 'lines' })}`, onLine);
  }
  /** `usage --by`: per key and hour or day. */
  usageBuckets(filter: {
    instance?: string | undefined;
    key?: string | undefined;
    since?: string | undefined;
    until?: string | undefined;
    by: 'hour' | 'day';
  }): Promise<UsageBucketsReport> {
    const q = Object.entries(filter)
      .filter(([, v]) => v !== undefined)
      .map(([k, v]) => `${k}=${encodeURIComponent(v as string)}`)
      .join('&');
    return this.call('GET', `/v1/usage/buckets?${q}`);
  }
  /** Live figures per instance (the console's live view). */
  stats(): Promise<LiveStatsView> {
    return this.call('GET', '/v1/stats');
  }
  revocations(instance?: string): Promise<RevocationView[]> {
    return this.call(
      'GET',
      `/v1/revocations${instance === undefined ? '' : `?instance=${encodeURIComponent(instance)}`}`,
    );
  }

  /**
   * Follows the daemon's event stream; `onEvent` gets every change. Resolves when the stream
   * ends (daemon stopped) and rejects if it cannot connect. `signal` stops following.
   * `onOpen` runs once the daemon has subscribed this stream, so a caller that reads state then
   * misses no change. Like every call, the stream has its own connection.
   */
  async follow(onEvent: (e: AuditEvent) => void, signal: AbortSignal, onOpen?: () => void): Promise<void> {
    let res: SocketResponse;
    try {
      res = await socketRequest(this.socketPath, 'GET', '/v1/events', undefined, signal);
    } catch (err) {
      if (signal.aborted) return;
      throw this.unreachable(err);
    }
    onOpen?.();
    let buf = '';
    // A character split across two chunks stays whole.
    const utf8 = new TextDecoder();
    try {
      for await (const chunk of res.body) {
        buf += utf8.decode(chunk, { stream: true });
        let at: number;
        while ((at = buf.indexOf('\n\n')) !== -1) {
          const frame = buf.slice(0, at);
          buf = buf.slice(at + 2);
          if (frame.startsWith('data: ')) onEvent(JSON.parse(frame.slice(6)) as AuditEvent);
        }
      }
    } catch (err) {
      if (!signal.aborted) throw this.unreachable(err);
    } finally {
      res.destroy();
    }
  }

  /** Nothing stays open between calls; kept so callers need not know. */
  close(): Promise<void> {
    return Promise.resolve();
  }
}

export type { Instance };

export interface PageQuery {
  instance?: string | undefined;
  limit: number;
  after?: string | undefined;
}

/** A query string of the fields given. */
function query(q: object): string {
  return Object.entries(q as Record<string, string | number | undefined>)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${k}=${encodeURIComponent(String(v))}`)
    .join('&');
}

/** The daemon's refusal, as the ObProxyError it sent. */
function refusal(status: number, parsed: unknown): ObProxyError {
  const e = (parsed as { error?: { code?: unknown; message?: unknown; param?: unknown } } | null)?.error;
  const code = isErrorCode(e?.code) ? e.code : 'internal_error';
  return obError(code, {
    status,
    message: typeof e?.message === 'string' ? e.message : `The daemon answered HTTP ${status}.`,
    param: typeof e?.param === 'string' ? e.param : null,
  });
}
