/**
 * `runCli` (cli/program.ts) in process: a DaemonClient whose calls go to a daemon's management
 * plane through `inject()` instead of the socket, or to nothing (daemon_unreachable), and an Io
 * that keeps stdout and stderr. The socket transport itself is covered end to end.
 */
import type { FastifyInstance } from 'fastify';
import { DaemonClient } from '../../cli/daemon-client.js';
import type { Io } from '../../cli/output.js';
import { type ProgramDeps, runCli } from '../../cli/program.js';
import { isErrorCode, obError } from '../../src/errors.js';

export const FAKE_SOCKET = '/inproc/ob-proxy.sock';

/** The real client's answer handling, over inject: refusals come back as the daemon's ObProxyError. */
export class InjectClient extends DaemonClient {
  readonly paths: string[] = [];

  constructor(private readonly app: FastifyInstance | null) {
    super(FAKE_SOCKET);
  }

  override async call<T>(method: 'GET' | 'POST' | 'DELETE', path: string, body?: unknown): Promise<T> {
    this.paths.push(`${method} ${path}`);
    if (this.app === null) {
      throw obError('daemon_unreachable', {
        message: `Cannot reach the ob-proxy daemon at ${this.socketPath} (ECONNREFUSED). Start it with \`ob-proxy serve\`, or pass the right --home/--socket.`,
      });
    }
    const res = await this.app.inject({
      method,
      url: path,
      ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, payload: JSON.stringify(body) }),
    });
    const parsed = res.body === '' ? null : (JSON.parse(res.body) as unknown);
    if (res.statusCode >= 400) {
      const e = (parsed as { error?: { code?: unknown; message?: unknown; param?: unknown } } | null)?.error;
      throw obError(isErrorCode(e?.code) ? e.code : 'internal_error', {
        status: res.statusCode,
        message: typeof e?.message === 'string' ? e.message : `The daemon answered HTTP ${res.statusCode}.`,
        param: typeof e?.param === 'string' ? e.param : null,
      });
    }
    return parsed as T;
  }

  /** A whole list over inject: its lines handed on once the answer is complete. */
  override async lines(path: string, onLine: (line: string) => void): Promise<void> {
    this.paths.push(`GET ${path}`);
    if (this.app === null) return this.call('GET', path);
    const res = await this.app.inject({ method: 'GET', url: path });
    if (res.statusCode >= 400) return this.call('GET', path);
    for (const line of res.body.split('\n')) if (line !== '') onLine(line);
  }
}

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

export interface InprocCli {
  run(...argv: string[]): Promise<CliRun>;
  /** Runs with --json, expects exit 0 and an empty stderr, and parses stdout. */
  json<T>(...argv: string[]): Promise<T>;
  /** The socket paths the commands connected to, in order. */
  connected: string[];
  client: InjectClient;
}

/** A CLI whose daemon is `app` (a management plane), or unreachable when null. */
export function inprocCli(
  app: FastifyInstance | null,
  opts: { env?: Record<string, string>; ask?: (q: string) => Promise<string>; homedir?: string } = {},
): InprocCli {
  const client = new InjectClient(app);
  const connected: string[] = [];
  const refuse = (what: string) => (): Promise<void> => Promise.reject(new Error(`${what} is not run in process`));
  const run = async (...argv: string[]): Promise<CliRun> => {
    let stdout = '';
    let stderr = '';
    const io: Io = {
      out: (s) => {
        stdout += s;
      },
      err: (s) => {
        stderr += s;
      },
      isTTY: false,
      env: opts.env ?? {},
      ...(opts.ask === undefined ? {} : { ask: opts.ask }),
    };
    const deps: ProgramDeps = {
      io,
      homedir: opts.homedir ?? '/home/inproc',
      version: '0.0.0-test',
      connect: (path) => {
        connected.push(path);
        return Promise.resolve(client);
      },
      serve: refuse('serve'),
      simulate: refuse('simulate'),
      demo: refuse('demo'),
    };
    const code = await runCli(argv, deps);
    return { code, stdout, stderr };
  };
  return {
    run,
    connected,
    client,
    json: async <T>(...argv: string[]): Promise<T> => {
      const r = await run(...argv, '--json');
      if (r.code !== 0 || r.stderr !== '')
        throw new Error(`ob-proxy ${argv.join(' ')} --json: exit ${r.code}: ${r.stderr}`);
      return JSON.parse(r.stdout) as T;
    },
  };
}
