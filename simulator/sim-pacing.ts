/**
 * Writing a stream of whole SSE frames for the legacy completions and Messages routes: paced at
 * `tokensPerSecond`, with back-pressure, held after the first frame while the simulator is held
 * (Simulator.hold), and cut as the failure knobs say (`hang-mid-stream` leaves the body open after
 * `failAfterChunks` frames, `eof-mid-stream` and `drop-mid-stream` end it or cut the connection there).
 */
import type { ChatEnv, Job } from './sim-job.js';
import type { Knobs } from './sim-types.js';

const SSE_HEADERS = { 'Content-Type': 'text/event-stream' };

/** Runs `fn` after `ms` unless the job is done by then; at once when ms <= 0. */
export function later(job: Job, ms: number, fn: () => void): void {
  if (ms <= 0) {
    fn();
    return;
  }
  job.timer = setTimeout(() => {
    job.timer = null;
    if (!job.done) fn();
  }, ms);
}

/** `content`: how many frames carry tokens (counted in the record's chunksSent as they go). */
export function writeFrames(
  job: Job,
  frames: readonly string[],
  k: Readonly<Knobs>,
  env: ChatEnv,
  headers: Record<string, string> = SSE_HEADERS,
): void {
  const { res, record } = job;
  res.writeHead(200, headers);
  const interval = k.tokensPerSecond > 0 ? 1000 / k.tokensPerSecond : 0;
  const cutting = k.fail === 'hang-mid-stream' || k.fail === 'eof-mid-stream' || k.fail === 'drop-mid-stream';
  const limit = cutting ? Math.min(k.failAfterChunks, frames.length) : frames.length;
  let i = 0;
  let heldOnce = false;
  const step = (): void => {
    while (!job.done && i < limit) {
      const ok = res.write(frames[i++]);
      record.chunksSent = i;
      env.changed(record);
      const held = heldOnce ? null : env.held();
      if (held !== null && i < limit) {
        heldOnce = true;
        void held.then(() => {
          if (!job.done) step();
        });
        return;
      }
      if (i < limit && interval > 0) {
        later(job, interval, step);
        return;
      }
      if (i < limit && !ok) {
        res.once('drain', step);
        return;
      }
    }
    if (job.done) return;
    if (k.fail === 'hang-mid-stream') res.flushHeaders();
    else if (k.fail === 'drop-mid-stream') {
      job.cut = true;
      job.socket.destroy();
    } else res.end();
  };
  step();
}
