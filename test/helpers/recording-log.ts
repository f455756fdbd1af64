import type { Logger } from 'pino';

export interface LogLine {
  level: 'info' | 'warn' | 'error';
  msg: string;
  /** The object logged with the message, if any. */
  obj?: unknown;
}

/** A logger that keeps what a daemon part wrote, line by line, for a unit test to compare whole. */
export function recordingLog(): { log: Logger; lines: LogLine[] } {
  const lines: LogLine[] = [];
  const at =
    (level: LogLine['level']) =>
    (first: unknown, msg?: string): void => {
      lines.push(typeof first === 'string' ? { level, msg: first } : { level, msg: msg ?? '', obj: first });
    };
  return { log: { info: at('info'), warn: at('warn'), error: at('error') } as unknown as Logger, lines };
}
