import type { FastifyBaseLogger } from 'fastify';
import type { Instance } from '../src/domain/instance.js';
import { obError } from '../src/errors.js';
import { clipped } from '../src/printable.js';
import { OperatorFileError, operatorFiles } from './operator-file.js';

/** A bearer token is a line of at most a few KiB; the file is read no further than this. */
const MAX_TOKEN_FILE_BYTES = 64 * 1024;

/**
 * Model-server bearer tokens, read from the files instances name and held in memory only, so the
 * request path never touches the disk and the store never holds a token. A file is (re)read when
 * its instance is added or made ready, and for every instance at start-up.
 */
export class UpstreamTokens {
  private readonly tokens = new Map<string, string>();

  get(instanceId: string): string | undefined {
    return this.tokens.get(instanceId);
  }

  /** Reads the instance's token file; refuses with a clear message if it cannot. */
  async load(instance: Pick<Instance, 'id' | 'upstreamTokenFile'>): Promise<void> {
    const path = instance.upstreamTokenFile;
    if (path === null || path === undefined) {
      this.tokens.delete(instance.id);
      return;
    }
    this.tokens.set(instance.id, await readToken(path));
  }

  /**
   * Every instance's token, at start. A missing token file must not keep the daemon down: the
   * instance's requests will be refused by its model server, and the operator is told here.
   */
  async loadAll(instances: Iterable<Instance>, log: Pick<FastifyBaseLogger, 'error'>): Promise<void> {
    for (const inst of instances) {
      await this.load(inst).catch((err: unknown) =>
        log.error({ instance: inst.id, err: (err as Error).message }, 'upstream token not loaded'),
      );
    }
  }

  forget(instanceId: string): void {
    this.tokens.delete(instanceId);
  }

  /** Tokens a management route read just before the change that needs them, by file. */
  private readonly prepared = new Map<string, string>();

  /**
   * Reads a token file before an instance is added or made ready with it: an unreadable file is
   * refused before anything changes, and the change's own event then takes this token without
   * waiting on the disk (follow), so the instance is never ready without it.
   */
  async prepare(path: string): Promise<string> {
    const token = await readToken(path);
    this.prepared.set(path, token);
    return token;
  }

  /**
   * The instance was just added or made ready: its token, at once if this daemon's route has
   * prepared it, else read from its file (a change heard from another daemon of a shared store).
   */
  follow(instance: Pick<Instance, 'id' | 'upstreamTokenFile'>, origin: 'local' | 'remote'): Promise<void> | undefined {
    const path = instance.upstreamTokenFile;
    const token = origin === 'local' && path !== null && path !== undefined ? this.prepared.get(path) : undefined;
    if (token === undefined) return this.load(instance);
    this.prepared.delete(path as string);
    this.tokens.set(instance.id, token);
    return undefined;
  }
}

export async function readToken(path: string): Promise<string> {
  let text: string;
  try {
    text = (await operatorFiles.read(path, { cap: MAX_TOKEN_FILE_BYTES })).toString('utf8');
  } catch (err) {
    if (!(err instanceof OperatorFileError)) throw err;
    throw obError('invalid_argument', {
      param: 'upstreamTokenFile',
      message:
        err.problem === 'unreadable'
          ? `The daemon cannot read the upstream token file ${clipped(path)} (${err.code}). Make it readable by the daemon's user.`
          : `The upstream token file ${clipped(path)} ${err.reason}. Give a regular file that holds the token on one line.`,
    });
  }
  const token = text.trim();
  // eslint-disable-next-line no-control-regex -- refusing control characters is the point
  if (token === '' || /[\s\u0000-\u001f]/.test(token)) {
    throw obError('invalid_argument', {
      param: 'upstreamTokenFile',
      message: `The upstream token file ${clipped(path)} must hold one token on one line.`,
    });
  }
  return token;
}
