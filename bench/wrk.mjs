/**
 * Runs wrk (the load generator of record when installed) and parses its report. The request is
 * set by a Lua script written next to the body file; it holds the API key, so it lives only in
 * the run's temporary folder.
 */
import { execFile, execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';

export function hasWrk() {
  try {
    execFileSync('wrk', ['--version'], { stdio: 'ignore' });
    return true;
  } catch (err) {
    // wrk --version exits 1 after printing its version
    return err.status === 1;
  }
}

function toMs(value, unit) {
  const v = Number(value);
  return unit === 'us' ? v / 1000 : unit === 'ms' ? v : unit === 's' ? v * 1000 : unit === 'm' ? v * 60_000 : v;
}

export function parseWrk(out) {
  const lat = (p) => {
    const m = new RegExp(`^\\s*${p}%\\s+([\\d.]+)(us|ms|s|m)\\s*$`, 'm').exec(out);
    return m === null ? null : toMs(m[1], m[2]);
  };
  const rps = /Requests\/sec:\s+([\d.]+)/.exec(out);
  const total = /(\d+) requests in/.exec(out);
  const non2xx = /Non-2xx or 3xx responses:\s+(\d+)/.exec(out);
  const sock = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
  return {
    rps: rps === null ? null : Number(rps[1]),
    requests: total === null ? 0 : Number(total[1]),
    p50: lat(50),
    p99: lat(99),
    non200: non2xx === null ? 0 : Number(non2xx[1]),
    errors: sock === null ? 0 : Number(sock[1]) + Number(sock[2]) + Number(sock[3]) + Number(sock[4]),
  };
}

/** `wrk -t1 -cN -dS --latency` against url+path with a POST of bodyFile. */
export function runWrk({ url, path, bodyFile, headers, connections, durationS, scriptFile }) {
  const lines = [
    'wrk.method = "POST"',
    `local f = io.open("${bodyFile}", "rb")`,
    'wrk.body = f:read("*a")',
    'f:close()',
    'wrk.headers["Content-Type"] = "application/json"',
    ...Object.entries(headers).map(([k, v]) => `wrk.headers["${k}"] = "${v}"`),
  ];
  writeFileSync(scriptFile, `${lines.join('\n')}\n`, { mode: 0o600 });
  return new Promise((resolve, reject) => {
    execFile(
      'wrk',
      [
        '-t1',
        `-c${connections}`,
        `-d${Math.max(1, Math.round(durationS))}s`,
        '--latency',
        '--timeout',
        '10s',
        '-s',
        scriptFile,
        `${url}${path}`,
      ],
      { timeout: (durationS + 30) * 1000 },
      (err, stdout, stderr) => {
        if (err !== null) reject(new Error(`wrk failed: ${stderr || err.message}`));
        else resolve(parseWrk(stdout));
      },
    );
  });
}
