/**
 * Vitest global setup: the run's PostgreSQL server, shared by every test file (each test makes a
 * database of its own on it with `freshDatabase`). OB_PROXY_TEST_PG names a server to use instead;
 * otherwise one is started from npm's binaries for the run and stopped at its end. Its URL reaches
 * the forked workers through provide/inject, not the environment, so the daemons and CLIs that
 * tests spawn see only the URLs the tests give them.
 */
import type { TestProject } from 'vitest/node';
import type {} from './postgres.js';
import { startPgServer } from './pg-server.mjs';

export default async function setup(project: TestProject): Promise<(() => Promise<void>) | undefined> {
  const named = process.env.OB_PROXY_TEST_PG;
  if (named !== undefined && named !== '') {
    project.provide('obProxyTestPg', named);
    return undefined;
  }
  const server = await startPgServer();
  project.provide('obProxyTestPg', server.url);
  return () => server.destroy();
}
