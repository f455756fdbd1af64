import { join } from 'node:path';
import { DaemonClient } from '../../cli/daemon-client.js';
import { type ServeProcess, startServe, tmpHome } from './processes.js';

/** One `ob-proxy serve` process of a test, with a client on its management socket. */
export interface ServeNode {
  serve: ServeProcess;
  api: DaemonClient;
}

/** Daemons started as processes, each on a home of its own, often all on one shared store. */
export class ServeNodes {
  readonly all: ServeNode[] = [];

  /** A daemon on `store`, with `args` after `--store`. */
  async start(store: string, env: Record<string, string> = {}, args: string[] = []): Promise<ServeNode> {
    const home = await tmpHome();
    const serve = await startServe(home, ['--store', store, ...args], env);
    const n = { serve, api: new DaemonClient(join(home, 'ob-proxy.sock')) };
    this.all.push(n);
    return n;
  }

  async stopAll(): Promise<void> {
    for (const n of this.all.splice(0)) {
      await n.api.close().catch(() => {});
      await n.serve.stop();
    }
  }
}

/** The status `secret` gets from `GET /v1/models` on a daemon: 200 served, 401 refused, 503 out of sync. */
export async function modelsStatus(n: ServeNode, secret: string): Promise<number> {
  const res = await fetch(`${n.serve.baseUrl}/v1/models`, { headers: { authorization: `Bearer ${secret}` } });
  await res.arrayBuffer();
  return res.status;
}
