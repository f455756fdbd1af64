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
  const pretty = format === 'pretty' ? (await import('pino-pretty')).default : null;
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
    pretty !== null
      ? pretty({
          destination: out,
          translateTime: 'SYS:yyyy-mm-dd HH:MM:ss.l o',
          ignore: 'pid,hostname',
          sync: stream !== undefined,
        })
      : out,
  );
}
