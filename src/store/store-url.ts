/**
 * Which backend a `--store` value names: a `postgres://` or `postgresql://` URL is a PostgreSQL
 * database shared by several daemons; anything else is a path to the JSON file store. Kept apart
 * from the PostgreSQL store so the CLI and the settings can tell without loading the driver.
 */
export function isPostgresUrl(store: string): boolean {
  return /^postgres(ql)?:\/\//i.test(store);
}
