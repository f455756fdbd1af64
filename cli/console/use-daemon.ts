/**
 * The console's view of the daemon: status and instances, kept current by the daemon's event
 * stream (keys and revocations are read by the page, `use-page.ts`). On connect the stream is
 * opened first and state is read once it is subscribed, so no change falls between the two.
 * Every event refetches (coalesced: while one refetch runs, later events mark it dirty and it
 * runs once more); an instance list is one row an instance, never a key list. When the daemon goes away the
 * hook says why and retries until it comes back. Nothing here ever holds a secret.
 */
import { useEffect, useRef, useState } from 'react';
import type { AuditEvent } from '../../src/domain/key.js';
import type { InstanceView, StatusView } from '../../src/wire/views.js';
import type { ConsoleClient } from './console-client.js';

export type Connection =
  { state: 'connecting' } | { state: 'live' } | { state: 'down'; message: string; attempts: number };

export interface DaemonData {
  connection: Connection;
  status: StatusView | null;
  instances: InstanceView[];
  /** True once the first full read has arrived. */
  loaded: boolean;
}

export interface UseDaemonOptions {
  /** Wait between reconnection attempts. */
  retryMs: number;
  /** Re-read while live, for what changes without an event. */
  pollMs: number;
  onEvent(event: AuditEvent): void;
}

const INITIAL: DaemonData = {
  connection: { state: 'connecting' },
  status: null,
  instances: [],
  loaded: false,
};

function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        resolve();
      },
      { once: true },
    );
  });
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

export function useDaemon(
  client: ConsoleClient,
  options: UseDaemonOptions,
): { data: DaemonData; refresh(): Promise<void> } {
  const [data, setData] = useState<DaemonData>(INITIAL);
  const onEvent = useRef(options.onEvent);
  onEvent.current = options.onEvent;
  const refreshRef = useRef<() => Promise<void>>(async () => {});
  const { retryMs, pollMs } = options;

  useEffect(() => {
    const ac = new AbortController();
    let running = false;
    let dirty = false;
    let live = false;
    // JSON of what was last shown: an unchanged read does not re-render.
    const last = { status: '', instances: '' };

    // Status is read every time too: a daemon still starting answers on its socket before its
    // public port is bound, with an empty baseUrl.
    const read = async (): Promise<void> => {
      const [status, instances] = await Promise.all([client.status(), client.listInstances()]);
      if (ac.signal.aborted) return;
      const next = { status: JSON.stringify(status), instances: JSON.stringify(instances) };
      if (next.status === last.status && next.instances === last.instances) return;
      Object.assign(last, next);
      setData((d) => ({ ...d, status, instances, loaded: true }));
    };

    const refresh = async (): Promise<void> => {
      if (running) {
        dirty = true;
        return;
      }
      running = true;
      try {
        do {
          dirty = false;
          await read();
        } while (dirty && !ac.signal.aborted);
      } finally {
        running = false;
      }
    };
    // A failed read while the stream is up is reported by the stream itself when the daemon is gone.
    const refreshQuietly = (): Promise<void> => refresh().catch(() => {});
    refreshRef.current = refreshQuietly;

    void (async () => {
      let attempts = 0;
      while (!ac.signal.aborted) {
        let message: string;
        try {
          const status = await client.status();
          setData((d) => ({ ...d, status }));
          await client.follow(
            (e) => {
              onEvent.current(e);
              void refreshQuietly();
            },
            ac.signal,
            () => {
              void refresh().then(
                () => {
                  attempts = 0;
                  live = true;
                  setData((d) => ({ ...d, connection: { state: 'live' } }));
                },
                () => {},
              );
            },
          );
          if (ac.signal.aborted) break;
          message = 'The ob-proxy daemon stopped (its event stream closed). Start it again with `ob-proxy serve`.';
        } catch (err) {
          if (ac.signal.aborted) break;
          message = messageOf(err);
        }
        live = false;
        attempts += 1;
        setData((d) => ({ ...d, connection: { state: 'down', message, attempts } }));
        await pause(retryMs, ac.signal);
      }
    })();

    const poll = setInterval(() => {
      if (live) void refreshQuietly();
    }, pollMs);
    return () => {
      ac.abort();
      clearInterval(poll);
    };
  }, [client, retryMs, pollMs]);

  return { data, refresh: () => refreshRef.current() };
}
