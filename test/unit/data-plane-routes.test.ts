import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DATA_PLANE_ROUTES } from '../../daemon/data-plane/routes.js';
import { type Inproc, buildInproc } from '../helpers/inproc.js';

const ROOT = join(import.meta.dirname, '..', '..');
const PAGES = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** The metrics listener's one route, which pages name beside the data plane's. */
const METRICS = 'GET /metrics';

/** Every `METHOD /path` a page names for the public port (a HEAD of a GET route is served by Fastify with it). */
function routesNamed(text: string): string[] {
  const named = [...text.matchAll(/\b(GET|POST|HEAD|PUT|DELETE|PATCH) (\/[A-Za-z0-9_/{}.-]*)/g)].map(
    (m) => `${m[1] === 'HEAD' ? 'GET' : m[1]} ${(m[2] as string).replace(/[.]$/, '')}`,
  );
  return named.filter((r) => r !== METRICS);
}

const SERVED = new Set(DATA_PLANE_ROUTES.map((r) => `${r.method} ${r.path}`));

describe('the data plane routes', () => {
  let d: Inproc;
  beforeAll(async () => {
    d = await buildInproc();
  });
  afterAll(() => d.close());

  it('are every one registered on the listener', () => {
    const missing = DATA_PLANE_ROUTES.filter(
      (r) => !d.daemon.dataPlane.hasRoute({ method: r.method, url: r.path.replace(/\{(\w+)\}/g, ':$1') }),
    );
    expect(missing).toEqual([]);
  });

  /** A route of the management socket, which pages name beside the public port's. */
  const managementHas = (route: string): boolean => {
    const [method, url] = route.split(' ') as ['GET' | 'POST', string];
    return d.daemon.management.hasRoute({ method, url: url.replace(/\{(\w+)\}/g, ':$1') });
  };

  it('are the only ones a doc page names for the public port', () => {
    const unknown = PAGES.flatMap((page) =>
      routesNamed(readFileSync(join(ROOT, page), 'utf8'))
        .filter((r) => !SERVED.has(r) && !managementHas(r))
        .map((r) => `${page}: ${r}`),
    );
    expect([...new Set(unknown)]).toEqual([]);
  });

  it('are each listed in docs/compatibility.md', () => {
    const page = readFileSync(join(ROOT, 'docs/compatibility.md'), 'utf8');
    const absent = DATA_PLANE_ROUTES.filter((r) => !page.includes(`\`${r.path}\``) && !page.includes(` ${r.path}\``))
      .filter((r) => !page.includes(`${r.method} ${r.path}`))
      .map((r) => `${r.method} ${r.path}`);
    expect(absent).toEqual([]);
  });
});
