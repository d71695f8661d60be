/** Where the tests of this run create their databases when DATABASE_URL is not set. */
const DEFAULT_ADMIN_URL = 'postgres://postgres@127.0.0.1:5432/postgres';

/**
 * The maintenance database (`postgres`) of the run's server: DATABASE_URL (set by `npm test`) with
 * its database name replaced, else the local default. Tests issue CREATE/DROP DATABASE through it.
 */
export function adminDatabaseUrl(): string {
  const configured = process.env.DATABASE_URL;
  return configured ? databaseUrlFor(configured, 'postgres') : DEFAULT_ADMIN_URL;
}

/** `serverUrl` (credentials, host, port, parameters kept) pointing at the database `name`. */
export function databaseUrlFor(serverUrl: string, name: string): string {
  const url = new URL(serverUrl);
  url.pathname = `/${encodeURIComponent(name)}`;
  return url.toString();
}
