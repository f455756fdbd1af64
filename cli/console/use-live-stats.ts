import { useEffect, useState } from 'react';
import type { InstanceLiveView, LiveStatsView } from '../../src/services/live-stats.js';
import type { ConsoleClient } from './console-client.js';

/**
 * The daemon's live figures, polled every `everyMs` while connected. A failed read (a daemon
 * older than the stats route, or one going away) shows nothing rather than stale figures; the
 * connection itself is reported by useDaemon.
 */
export function useLiveStats(
  client: ConsoleClient,
  enabled: boolean,
  everyMs: number,
): ReadonlyMap<string, InstanceLiveView> {
  const [stats, setStats] = useState<ReadonlyMap<string, InstanceLiveView>>(new Map());
  useEffect(() => {
    if (!enabled) return;
    let stopped = false;
    let last = '';
    const read = (): void => {
      client.stats().then(
        (view: LiveStatsView) => {
          const text = JSON.stringify(view.instances);
          if (stopped || text === last) return;
          last = text;
          setStats(new Map(view.instances.map((i) => [i.instance, i])));
        },
        () => {
          if (stopped || last === '') return;
          last = '';
          setStats(new Map());
        },
      );
    };
    read();
    const t = setInterval(read, everyMs);
    return () => {
      stopped = true;
      clearInterval(t);
    };
  }, [client, enabled, everyMs]);
  return stats;
}
