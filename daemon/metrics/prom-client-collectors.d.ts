/** prom-client's default collectors, one module each (prom-client 15 ships no types for them). */
declare module 'prom-client/lib/metrics/*.js' {
  import type { Registry } from 'prom-client';

  const collect: (registry: Registry, config: { prefix: string; eventLoopMonitoringPrecision: number }) => void;
  export default collect;
}
