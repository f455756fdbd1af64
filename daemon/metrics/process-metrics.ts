import type { Registry } from 'prom-client';
import eventLoopLag from 'prom-client/lib/metrics/eventLoopLag.js';
import heapSizeAndUsed from 'prom-client/lib/metrics/heapSizeAndUsed.js';
import heapSpacesSizeAndUsed from 'prom-client/lib/metrics/heapSpacesSizeAndUsed.js';
import osMemoryHeap from 'prom-client/lib/metrics/osMemoryHeap.js';
import processCpuTotal from 'prom-client/lib/metrics/processCpuTotal.js';
import processHandles from 'prom-client/lib/metrics/processHandles.js';
import processMaxFileDescriptors from 'prom-client/lib/metrics/processMaxFileDescriptors.js';
import processOpenFileDescriptors from 'prom-client/lib/metrics/processOpenFileDescriptors.js';
import processRequests from 'prom-client/lib/metrics/processRequests.js';
import processResources from 'prom-client/lib/metrics/processResources.js';
import processStartTime from 'prom-client/lib/metrics/processStartTime.js';
import version from 'prom-client/lib/metrics/version.js';

/**
 * prom-client's default metrics (`collectDefaultMetrics`) but its garbage-collection histogram,
 * `nodejs_gc_duration_seconds`. That one watches every collection with a PerformanceObserver, and
 * Node's delivery of each entry left about 4.5 KB to be copied to the old generation at every
 * young-generation collection: 8 bytes a plain request and 20 to 35 a stream, the whole of what
 * the metrics promoted (docs/performance.md, "What each optimisation bought"). The others are read when scraped, or
 * kept by Node itself (the event-loop delay histogram).
 */
export function collectProcessMetrics(registry: Registry, prefix: string): void {
  const config = { prefix, eventLoopMonitoringPrecision: 10 };
  for (const collect of [
    processCpuTotal,
    processStartTime,
    osMemoryHeap,
    processOpenFileDescriptors,
    processMaxFileDescriptors,
    eventLoopLag,
    processResources,
    processHandles,
    processRequests,
    heapSizeAndUsed,
    heapSpacesSizeAndUsed,
    version,
  ])
    collect(registry, config);
}
