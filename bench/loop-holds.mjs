/* global process, setInterval, performance */
/**
 * Loaded into a daemon by the scale bench (`node --import bench/loop-holds.mjs`, with
 * OB_BENCH_HOLDS naming a file): the longest the daemon's main thread went between two ticks of
 * a 1 ms timer, as wall time and as the main thread's own CPU time. The wall figure is what a
 * request arriving then waited; the CPU figure is the part of it the daemon's own work took,
 * which the machine's other processes do not lengthen (a thread descheduled uses no CPU). On
 * SIGUSR2 the two are appended to the file as a JSON line, and both start again from zero.
 *
 * OB_BENCH_HOLDS_OVER=<ms>: each hold longer than that is also appended as `{ fromUs, toUs }`
 * on the monotonic clock a `--cpu-prof` profile's timestamps use, to find its work there.
 */
import { appendFileSync } from 'node:fs';

const file = process.env.OB_BENCH_HOLDS;
const over = Number(process.env.OB_BENCH_HOLDS_OVER || Infinity);
const monoUs = () => Number(process.hrtime.bigint() / 1000n);
const cpuMs = () => {
  const u = process.threadCpuUsage();
  return (u.user + u.system) / 1000;
};
let lastCpu = cpuMs();
let lastWall = performance.now();
let maxCpu = 0;
let maxWall = 0;
setInterval(() => {
  const c = cpuMs();
  const w = performance.now();
  if (c - lastCpu > maxCpu) maxCpu = c - lastCpu;
  if (w - lastWall > maxWall) maxWall = w - lastWall;
  if (w - lastWall > over && file !== undefined) {
    const toUs = monoUs();
    appendFileSync(file, `${JSON.stringify({ fromUs: toUs - Math.round((w - lastWall) * 1000), toUs })}\n`);
  }
  lastCpu = c;
  lastWall = w;
}, 1).unref();
process.on('SIGUSR2', () => {
  if (file !== undefined)
    appendFileSync(file, `${JSON.stringify({ cpuMs: +maxCpu.toFixed(1), wallMs: +maxWall.toFixed(1) })}\n`);
  maxCpu = 0;
  maxWall = 0;
  lastCpu = cpuMs();
  lastWall = performance.now();
});
