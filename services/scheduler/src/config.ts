/**
 * Configuration of the scheduler, from the environment.
 */
import { COMMON_ENV, intVar, loadEnvConfig, type EnvConfig } from '@sluice/runtime';

export const SCHEDULER_ENV = {
  ...COMMON_ENV,
  /** Steps claimed (and outcomes applied, events relayed) per transaction. */
  SLUICE_SCHEDULER_BATCH: intVar(200, 1, 5_000),
  /**
   * Longest pause between two looks at Postgres when no wake-up arrives (wake-ups are core NATS
   * messages and may be lost; this bounds the delay, and finds steps whose due time came).
   */
  SLUICE_SCHEDULER_POLL_MS: intVar(1_000, 10, 60_000),
  /** Leader lease time-to-live of the event relay. */
  SLUICE_LEASE_TTL_MS: intVar(5_000, 1_000, 300_000),
};

export type SchedulerConfig = EnvConfig<typeof SCHEDULER_ENV>;

export function loadSchedulerConfig(
  env: Record<string, string | undefined> = process.env,
): SchedulerConfig {
  return loadEnvConfig(SCHEDULER_ENV, env);
}
