/**
 * A store URL as it may be shown (logs, errors, `status`): never a secret. Invariant: a value is
 * shown only if its parameter is a known, harmless setting; everything else is `***`.
 *
 * node-postgres reads every parameter of the URL as a setting, `password` and `sslpassword`
 * included (`postgres://ob@db/x?password=…` connects), so the value of any other parameter is
 * hidden: a name it does not know may hold a secret too.
 */
const SHOWN_PARAMS = new Set([
  'host',
  'port',
  'user',
  'dbname',
  'db',
  'application_name',
  'fallback_application_name',
  'client_encoding',
  'connect_timeout',
  'ssl',
  'sslmode',
  'sslrootcert',
  'sslcert',
  'sslkey',
  'target_session_attrs',
  'keepalives',
  'keepalives_idle',
  'statement_timeout',
  'query_timeout',
  'idle_in_transaction_session_timeout',
  'uselibpqcompat',
]);

/** The URL without its password (in the user part or the query) or fragment, for logs, errors and `status`. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    u.password = '';
    u.hash = '';
    const shown = new URLSearchParams();
    for (const [name, value] of u.searchParams) shown.append(name, SHOWN_PARAMS.has(name) ? value : '***');
    u.search = shown.toString();
    return u.toString();
  } catch {
    return 'postgres://(unparsable URL)';
  }
}
