/**
 * Configuration of the governor, from the environment.
 */
import { COMMON_ENV, intVar, loadEnvConfig, type EnvConfig } from '@sluice/runtime';

/** Default lease time-to-live: a killed leader is replaced within about this long. */
export const DEFAULT_LEASE_TTL_MS = 5_000;

/**
 * Default pause between two publications of the leader's decision. Readers treat the KV value as
 * the live view; re-publishing keeps `decided_at` fresh so they can tell a live governor from a
 * stale document, and re-announces it to subscribers that joined late.
 */
export const DEFAULT_GOVERNOR_INTERVAL_MS = 1_000;

/** The variables the governor reads. */
export const GOVERNOR_ENV = {
  ...COMMON_ENV,
  /** Leader lease time-to-live (the leases bucket's TTL; the same for every service). */
  SLUICE_LEASE_TTL_MS: intVar(DEFAULT_LEASE_TTL_MS, 1_000, 300_000),
  /** How often the leader re-publishes its decision. */
  SLUICE_GOVERNOR_INTERVAL_MS: intVar(DEFAULT_GOVERNOR_INTERVAL_MS, 50, 60_000),
};

/** The governor's parsed configuration. */
export type GovernorConfig = EnvConfig<typeof GOVERNOR_ENV>;

/**
 * Reads and validates the governor's configuration.
 *
 * @throws ConfigError (from `@sluice/runtime`) naming the first invalid variable.
 */
export function loadGovernorConfig(
  env: Record<string, string | undefined> = process.env,
): GovernorConfig {
  return loadEnvConfig(GOVERNOR_ENV, env);
}
