import { useEffect, useState } from 'react';

/**
 * The current time, re-read every `everyMs` so "time left" counts down on its own.
 * `clock` is injected so screen tests show fixed times.
 */
export function useNow(clock: () => number, everyMs: number): number {
  const [now, setNow] = useState(clock);
  useEffect(() => {
    const t = setInterval(() => setNow(clock()), everyMs);
    return () => clearInterval(t);
  }, [clock, everyMs]);
  return now;
}
