/**
 * Configuration of the governor, from the environment.
 */
import { z } from 'zod';
import { COMMON_ENV, intVar, loadEnvConfig, poolSizeVar, type EnvConfig } from '@sluice/runtime';
import { parseThresholds } from './pressure/thresholds.js';

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
  /** The governor's pool: its leader reads the signals once a tick, and little else touches it. */
  SLUICE_DB_POOL_SIZE: poolSizeVar(2),
  /** Leader lease time-to-live (the leases bucket's TTL; the same for every service). */
  SLUICE_LEASE_TTL_MS: intVar(DEFAULT_LEASE_TTL_MS, 1_000, 300_000),
  /**
   * How often the leader reads the signals and decides; a decision that says something new is
   * published at once, an unchanged one at least every quarter of `SLUICE_DECISION_STALE_MS`.
   */
  SLUICE_GOVERNOR_INTERVAL_MS: intVar(DEFAULT_GOVERNOR_INTERVAL_MS, 50, 60_000),
  /** Thresholds replacing the defaults of some signals (JSON; see docs/operations.md). */
  SLUICE_GOVERNOR_THRESHOLDS: z
    .string()
    .optional()
    .transform((text, ctx) => {
      const parsed = parseThresholds(text);
      if (typeof parsed === 'string') {
        ctx.addIssue({ code: 'custom', message: parsed });
        return z.NEVER;
      }
      return parsed;
    }),
  /** The window over which rates (429 share, retry share, latency p95) are measured. */
  SLUICE_GOVERNOR_WINDOW_MS: intVar(10_000, 1_000, 600_000),
  /** The retry delay a rejection suggests at its threshold (grows with the overload, ≤ 60 s). */
  SLUICE_GOVERNOR_RETRY_AFTER_MS: intVar(5_000, 100, 60_000),
  /** Breakers: failure share over the window, with at least the minimum calls, that opens one. */
  SLUICE_BREAKER_FAILURE_PERCENT: intVar(50, 1, 100),
  SLUICE_BREAKER_MIN_CALLS: intVar(20, 1, 100_000),
  SLUICE_BREAKER_WINDOW_MS: intVar(60_000, 1_000, 3_600_000),
  /** Failures in a row that open a breaker however few calls there were. */
  SLUICE_BREAKER_CONSECUTIVE_FAILURES: intVar(5, 1, 10_000),
  /** How long an open breaker admits nothing before it lets probes through. */
  SLUICE_BREAKER_COOL_DOWN_MS: intVar(30_000, 100, 3_600_000),
  /** Probes a half-open breaker admits at once, and the successes that close it. */
  SLUICE_BREAKER_PROBES: intVar(3, 1, 1_000),
  SLUICE_BREAKER_SUCCESSES_TO_CLOSE: intVar(3, 1, 1_000),
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
