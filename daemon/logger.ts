import { pino, type DestinationStream, type Logger } from 'pino';

/** JSON lines; anything that could hold a key is censored before it is written. */
export function buildLogger(level: string, stream?: DestinationStream): Logger {
  return pino({
    level,
    base: { pid: process.pid },
    redact: {
      paths: ['req.headers.authorization', 'headers.authorization', 'authorization', 'secret', '*.secret', 'defaultKey.secret'],
      censor: '[redacted]',
    },
  }, stream ?? pino.destination({ dest: 1, sync: false }));
}
