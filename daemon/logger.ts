import { pino, type DestinationStream, type Logger } from 'pino';
import { printableJsonText } from '../src/printable.js';

/**
 * JSON lines with ISO 8601 times (or pino-pretty's lines for people, from the same records);
 * anything that could hold a key is censored before it is written. Instance ids and
 * names from the store are logged, and pino leaves C1 and bidi characters raw: they are written
 * as \u escapes, so a log followed in a terminal cannot drive it.
 */
export async function buildLogger(
  level: string,
  stream?: DestinationStream,
  format: 'json' | 'pretty' = 'json',
): Promise<Logger> {
  const out = stream ?? pino.destination({ dest: 1, sync: false });
  // pino-pretty is loaded only for people at a terminal.
  const pretty = format === 'pretty' ? await prettyTo(out) : null;
  return pino(
    {
      level,
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: {
        paths: [
          'req.headers.authorization',
          'headers.authorization',
          'authorization',
          'secret',
          '*.secret',
          'defaultKey.secret',
        ],
        censor: '[redacted]',
      },
      hooks: { streamWrite: printableJsonText },
    },
    pretty ?? out,
  );
}

/**
 * pino-pretty's lines for `out`. It parses each JSON line again, which turns the \u escapes of
 * C1, bidi and separator characters back into the characters: its lines are escaped once more
 * (its own colours are ESC sequences, C0, and left alone; it shows C0 in values as \u escapes).
 */
async function prettyTo(out: DestinationStream): Promise<DestinationStream> {
  // Named export under Node's loader; only on `default` in the single binary's bundle (a CommonJS
  // module imported by esbuild).
  const mod = await import('pino-pretty');
  const prettyFactory = mod.prettyFactory ?? (mod.default as unknown as typeof mod).prettyFactory;
  const line = prettyFactory({ translateTime: 'SYS:yyyy-mm-dd HH:MM:ss.l o', ignore: 'pid,hostname' });
  const flushable = out as DestinationStream & { flush?: (cb?: (err?: Error) => void) => void };
  return {
    write: (json: string) => void out.write(printableJsonText(line(json))),
    ...(flushable.flush === undefined ? {} : { flush: (cb?: (err?: Error) => void) => flushable.flush!(cb) }),
  } as DestinationStream;
}
