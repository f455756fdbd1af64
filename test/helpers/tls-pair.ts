import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect } from 'node:tls';

export interface Pair {
  cert: string;
  key: string;
  pem: string;
  fingerprint: string;
}

/** A self-signed P-256 certificate for 127.0.0.1 and localhost, and its key, made with openssl. */
export function makePair(dir: string, name: string): Pair {
  const cert = join(dir, `${name}.crt`);
  const key = join(dir, `${name}.key`);
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-days',
      '2',
      '-subj',
      `/CN=${name}`,
      '-addext',
      'subjectAltName=IP:127.0.0.1,DNS:localhost',
      '-keyout',
      key,
      '-out',
      cert,
    ],
    { stdio: 'ignore' },
  );
  const pem = readFileSync(cert, 'utf8');
  return { cert, key, pem, fingerprint: new X509Certificate(pem).fingerprint256 };
}

/** The certificate a new TLS connection to the listener is given. */
export function servedFingerprint(baseUrl: string, ca: string[]): Promise<string> {
  const { hostname, port } = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const s = connect({ host: hostname, port: Number(port), ca, servername: 'localhost' }, () => {
      const fp = s.getPeerCertificate().fingerprint256;
      s.end();
      resolve(fp);
    });
    s.once('error', reject);
  });
}
