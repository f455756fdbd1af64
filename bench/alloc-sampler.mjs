/* global process */
/**
 * Loaded into a daemon with `--import` by bench/alloc-sites.mjs: the first SIGUSR2 starts V8's
 * sampling heap profiler, keeping the samples of objects already collected (young garbage is
 * what a request allocates most), and the second writes the profile to `$ALLOC_SAMPLE_OUT`.
 */
import { Session } from 'node:inspector';
import { renameSync, writeFileSync } from 'node:fs';

const session = new Session();
session.connect();
let sampling = false;
process.on('SIGUSR2', () => {
  if (!sampling) {
    sampling = true;
    session.post('HeapProfiler.startSampling', {
      samplingInterval: Number(process.env.ALLOC_SAMPLE_INTERVAL ?? 256),
      includeObjectsCollectedByMajorGC: true,
      // ALLOC_SAMPLE_MINOR=0: leave out what died young, so what remains is what a scavenge promoted.
      includeObjectsCollectedByMinorGC: process.env.ALLOC_SAMPLE_MINOR !== '0',
    });
    return;
  }
  sampling = false;
  session.post('HeapProfiler.stopSampling', (err, r) => {
    // Whole or not at all: the bench reads it as soon as it exists.
    const out = process.env.ALLOC_SAMPLE_OUT;
    writeFileSync(`${out}.tmp`, err === null ? JSON.stringify(r.profile) : String(err));
    renameSync(`${out}.tmp`, out);
  });
});
