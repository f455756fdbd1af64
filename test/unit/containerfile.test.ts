/**
 * packaging/Containerfile: built from the single binary, runs as a user of its own with
 * the state in a volume, and stops with SIGTERM. Its directives, here; the image built and run:
 * test/package/container.test.ts (npm run test:dist).
 */
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const FILE = resolve(ROOT, 'packaging/Containerfile');

/** Instructions with their arguments, continuation lines joined. */
function instructions(text: string): [string, string][] {
  return text
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'))
    .map((l) => {
      const at = l.indexOf(' ');
      return [l.slice(0, at).toUpperCase(), l.slice(at + 1).trim()] as [string, string];
    });
}

describe('packaging/Containerfile', () => {
  it('copies the single binary, runs it as a non-root user, keeps state in a volume, stops with SIGTERM', async () => {
    const ins = instructions(await readFile(FILE, 'utf8'));
    const all = (name: string): string[] => ins.filter(([n]) => n === name).map(([, a]) => a);
    expect(all('COPY')).toEqual(['--chmod=0755 dist-bin/ob-proxy /usr/local/bin/ob-proxy']);
    const user = all('USER');
    expect(user).toHaveLength(1);
    // Numeric, so Kubernetes' runAsNonRoot can check it; and not root.
    expect(user[0]).toMatch(/^[1-9]\d*:[1-9]\d*$/);
    // The last USER applies to the entry point: nothing after it switches back.
    expect(ins.findIndex(([n]) => n === 'USER')).toBeLessThan(ins.findIndex(([n]) => n === 'ENTRYPOINT'));
    expect(all('VOLUME')).toEqual(['["/var/lib/ob-proxy"]']);
    expect(all('ENV').join(' ')).toMatch(/OB_PROXY_HOME=\/var\/lib\/ob-proxy/);
    expect(all('ENV').join(' ')).toMatch(/OB_PROXY_HOST=0\.0\.0\.0/);
    expect(all('ENV').join(' ')).toMatch(/NODE_OPTIONS=--max-semi-space-size=8/);
    expect(all('STOPSIGNAL')).toEqual(['SIGTERM']);
    expect(all('ENTRYPOINT')).toEqual(['["/usr/local/bin/ob-proxy"]']);
    expect(all('CMD')).toEqual(['["serve"]']);
    // The home is made 0700 for that user: the daemon refuses a home others can read.
    expect(all('RUN').join(' ')).toMatch(/install -d -m 0700 -o ob-proxy -g ob-proxy \/var\/lib\/ob-proxy/);
  });
});
