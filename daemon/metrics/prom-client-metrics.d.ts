// prom-client's default metrics, one module each (lib/defaultMetrics.js registers them all).
declare module 'prom-client/lib/metrics/*.js' {
  import type { Registry } from 'prom-client';
  const register: (registry: Registry, config: { prefix?: string }) => void;
  export default register;
}
