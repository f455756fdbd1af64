/**
 * The fuzz suites again, with the daemon on the PostgreSQL store (a fresh database on the
 * local server): the same properties must hold whatever the store. The switch is read by
 * startHarness, so it is set before the suites are loaded.
 */
process.env.OB_PROXY_TEST_STORE = 'postgres';
await import('./fuzz-data-plane.test.js');
await import('./fuzz-management.test.js');
