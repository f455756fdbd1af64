import { createSecureContext } from 'node:tls';
import { OperatorFileError, operatorFiles } from './operator-file.js';

export interface TlsFiles {
  cert: Buffer;
  key: Buffer;
}

/** Bounds what is read: a PEM chain and key are a few KiB. Neither file's content ever goes in a message. */
const MAX_PEM_BYTES = 1024 * 1024;

async function readPem(path: string, flag: string): Promise<Buffer> {
  try {
    return await operatorFiles.read(path, { cap: MAX_PEM_BYTES });
  } catch (err) {
    if (!(err instanceof OperatorFileError)) throw err;
    const advice: Record<OperatorFileError['problem'], string> = {
      unreadable: 'give a PEM file this user may read',
      'not-a-file': 'give the path of the PEM file itself (a pipe or a device can block or never end)',
      'too-large': 'it is not a PEM certificate or key',
      'no-answer': 'move the PEM file to a local disk',
      busy: 'the certificate stays as it was',
    };
    if (err.problem === 'unreadable')
      throw new Error(`Cannot read ${flag} ${path} (${err.code}): ${advice.unreadable}.`, { cause: err });
    throw new Error(`${flag} ${path} ${err.reason}: ${advice[err.problem]}.`, { cause: err });
  }
}

/**
 * Reads the certificate (chain) and key (operator-file.ts: regular files only, capped while read,
 * one at a time, within a bounded time), and checks that they make a TLS context: both parse and
 * the key is the certificate's. Called at start, where a failure stops the daemon, and on SIGHUP,
 * where it keeps the certificate already served.
 */
export async function loadTls(files: { cert: string; key: string }): Promise<TlsFiles> {
  const [cert, key] = await Promise.all([readPem(files.cert, '--tls-cert'), readPem(files.key, '--tls-key')]);
  try {
    createSecureContext({ cert, key });
  } catch (err) {
    // OpenSSL's reason ("key values mismatch", "no start line"), never the file content.
    const reason = (err as Error).message.replace(/\s+/g, ' ');
    throw new Error(
      `--tls-cert ${files.cert} and --tls-key ${files.key} cannot serve HTTPS: ${reason}. Give the PEM certificate and its own private key.`,
      { cause: err },
    );
  }
  return { cert, key };
}
