/**
 * An ob-proxy daemon in process (test/helpers/inproc.ts), listening on 127.0.0.1:0 so that real
 * clients (the SDKs, fetch) reach it over a socket, with instances whose endpoints are real model
 * servers (test/helpers/realup.ts). The management plane is driven through `inject()`, as the CLI
 * would drive it over the socket.
 */
import { expect } from 'vitest';
import type { KeyUsage } from '../../src/domain/key.js';
import type { UsageReport } from '../../src/wire/usage-report.js';
import { type Inproc, buildInproc } from './inproc.js';

export interface Gateway {
  readonly inproc: Inproc;
  /** `http://127.0.0.1:PORT`; SDKs take `${baseUrl}/v1`. */
  readonly baseUrl: string;
  /** Adds an instance of `model` at `endpoint`, makes it ready (the daemon asks the server for its models), returns its default key's secret. */
  addReady(id: string, model: string, endpoint: string): Promise<string>;
  createKey(instance: string, name: string): Promise<{ id: string; secret: string }>;
  revoke(keyId: string): Promise<void>;
  /** The key's counters as `ob-proxy usage --json` shows them. */
  usage(keyId: string): Promise<KeyUsage>;
  /** Requests sent upstream for the key and not over yet. */
  inflight(keyId: string): number;
  close(): Promise<void>;
}

export async function startGateway(): Promise<Gateway> {
  const inproc = await buildInproc();
  await inproc.daemon.listen();
  const ok = (r: { status: number; text: string }, status: number, what: string): void => {
    if (r.status !== status) throw new Error(`${what}: ${r.status} ${r.text}`);
  };
  return {
    inproc,
    baseUrl: inproc.daemon.ctx.baseUrl,
    async addReady(id, model, endpoint) {
      ok(await inproc.manage('POST', '/v1/instances', { id, model, endpoint }), 201, `instances add ${id}`);
      const ready = await inproc.manage('POST', `/v1/instances/${id}/ready`, {});
      ok(ready, 200, `instances ready ${id}`);
      return (ready.json as { defaultKey: { secret: string } }).defaultKey.secret;
    },
    async createKey(instance, name) {
      const r = await inproc.manage('POST', '/v1/keys', { instance, name });
      ok(r, 201, `keys create ${name}`);
      return r.json as { id: string; secret: string };
    },
    async revoke(keyId) {
      ok(await inproc.manage('POST', `/v1/keys/${keyId}/revoke`), 200, `keys revoke ${keyId}`);
    },
    async usage(keyId) {
      const r = await inproc.manage('GET', `/v1/usage?key=${keyId}`);
      ok(r, 200, 'usage');
      const row = (r.json as UsageReport).packs.flatMap((p) => p.keys).find((k) => k.id === keyId);
      expect(row, `usage row of ${keyId}`).toBeDefined();
      const { id: _id, name: _name, status: _status, lastUsedAt: _last, ...counts } = row!;
      return counts;
    },
    inflight: (keyId) => inproc.daemon.ctx.inflight.count(keyId),
    close: () => inproc.close(),
  };
}
