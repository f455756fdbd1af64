import { readFile } from 'node:fs/promises';
import { createSecureContext } from 'node:tls';

export interface TlsFiles {
  cert: Buffer;
  key: Buffer;
}

/** Bounds what is read: a PEM chain and key are a few KiB. Neither file's content ever goes in a message. */
const MAX_PEM_BYTES = 1024 * 1024;

async function readPem(path: string, flag: string): Promise<Buffer> {
  let data: Buffer;
  try {
    data = await readFile(path);
  } catch (err) {
    throw new Error(
      `Cannot read ${flag} ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'}): give a PEM file this user may read.`,
      { cause: err },
    );
  }
  if (data.length > MAX_PEM_BYTES)
    throw new Error(`${flag} ${path} is larger than ${MAX_PEM_BYTES} bytes: it is not a PEM certificate or key.`);
  return data;
}

/**
 * Reads the certificate (chain) and key, and checks that they make a TLS context: both parse and
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
