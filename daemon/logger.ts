import { pino, type DestinationStream, type Logger } from 'pino';
import pretty from 'pino-pretty';
import { printableJsonText } from '../src/printable.js';

/**
 * JSON lines with ISO 8601 times (or pino-pretty's lines for people, from the same records);
 * anything that could hold a key is censored before it is written. Instance ids and
 * names from the store are logged, and pino leaves C1 and bidi characters raw: they are written
 * as \u escapes, so a log followed in a terminal cannot drive it.
 */
export function buildLogger(level: string, stream?: DestinationStream, format: 'json' | 'pretty' = 'json'): Logger {
  const out = stream ?? pino.destination({ dest: 1, sync: false });
  return pino({
    level,
    base: { pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: {
      paths: ['req.headers.authorization', 'headers.authorization', 'authorization', 'secret', '*.secret', 'defaultKey.secret'],
      censor: '[redacted]',
    },
    hooks: { streamWrite: printableJsonText },
  }, format === 'pretty' ? pretty({ destination: out, translateTime: 'SYS:yyyy-mm-dd HH:MM:ss.l o', ignore: 'pid,hostname', sync: stream !== undefined }) : out);
}
