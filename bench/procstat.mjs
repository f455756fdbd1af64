/* global setInterval, clearInterval */
/**
 * CPU and memory of the processes under test, read from /proc (Linux): CPU as utime+stime
 * deltas, memory as resident set size sampled while a scenario runs (peak of the sum).
 */
import { readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';

let ticksPerSecond = 100;
try {
  ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
} catch {
  // getconf missing: Linux's USER_HZ is 100 everywhere we run.
}

/**
 * CPU seconds the hypervisor has taken from the machine so far (the "steal" column of
 * /proc/stat, all CPUs), or null when it is not reported. On a shared VM it is the best single
 * sign that a run's absolute figures are not comparable with another run's.
 */
export function stolenSeconds() {
  try {
    const cpu = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/);
    return cpu[8] === undefined ? null : Number(cpu[8]) / ticksPerSecond;
  } catch {
    return null;
  }
}

/** CPU seconds (user + system) the processes have used so far. */
export function cpuSeconds(pids) {
  let ticks = 0;
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(f[11]) + Number(f[12]);
    } catch {
      // the process has exited: it uses no more CPU
    }
  }
  return ticks / ticksPerSecond;
}

/** Resident set size of the processes, in KiB. */
export function rssKiB(pids) {
  let kib = 0;
  for (const pid of pids) {
    try {
      const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
      if (m !== null) kib += Number(m[1]);
    } catch {
      // exited
    }
  }
  return kib;
}

/** Samples RSS every `ms` until stopped; `stop()` returns the peak in KiB. */
export function sampleRss(pids, ms = 50) {
  let peak = rssKiB(pids);
  const timer = setInterval(() => {
    const now = rssKiB(pids);
    if (now > peak) peak = now;
  }, ms);
  return {
    stop() {
      clearInterval(timer);
      return Math.max(peak, rssKiB(pids));
    },
  };
}

/** Child pids of a process (nginx's workers). */
export function childPids(pid) {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/** Read and write system calls the processes have made so far (/proc/<pid>/io). */
export function syscalls(pids) {
  let reads = 0;
  let writes = 0;
  for (const pid of pids) {
    try {
      const io = readFileSync(`/proc/${pid}/io`, 'utf8');
      reads += Number(/syscr:\s+(\d+)/.exec(io)?.[1] ?? 0);
      writes += Number(/syscw:\s+(\d+)/.exec(io)?.[1] ?? 0);
    } catch {
      // exited, or /proc/<pid>/io not readable
    }
  }
  return { reads, writes };
}
