import { pino, type DestinationStream, type Logger } from 'pino';
import { printableJsonText } from '../src/printable.js';

/**
 * JSON lines; anything that could hold a key is censored before it is written. Instance ids and
 * names from the store are logged, and pino leaves C1 and bidi characters raw: they are written
 * as \u escapes, so a log followed in a terminal cannot drive it.
 */
export function buildLogger(level: string, stream?: DestinationStream): Logger {
  return pino({
    level,
    base: { pid: process.pid },
    redact: {
      paths: ['req.headers.authorization', 'headers.authorization', 'authorization', 'secret', '*.secret', 'defaultKey.secret'],
      censor: '[redacted]',
    },
    hooks: { streamWrite: printableJsonText },
  }, stream ?? pino.destination({ dest: 1, sync: false }));
}
