/**
 * The retry budget's environment variables (part of the scheduler's configuration): validated at
 * start like the others, so a bad value stops the scheduler (exit code 2) with one line naming it.
 */
import { z } from 'zod';
import { DEFAULT_RETRY_BUDGET, type RetryBudgetConfig } from '@sluice/core';
import { intVar, type EnvConfig } from '@sluice/runtime';

/** A decimal number in [min, max], given as text (`0.2`). */
function decimalVar(fallback: number, min: number, max: number) {
  return z
    .string()
    .default(String(fallback))
    .refine((value) => /^\d+(\.\d+)?$/.test(value.trim()), {
      message: 'must be a decimal number (e.g. 0.2)',
    })
    .transform((value) => Number(value.trim()))
    .refine((value) => value >= min && value <= max, {
      message: `must be between ${min} and ${max}`,
    });
}

export const RETRY_BUDGET_ENV = {
  /**
   * Retries of a resource may add at most this share of its attempts over the window (0.2: 20 %),
   * plus the floor below; more are not dropped but pushed later (per scheduler replica).
   */
  SLUICE_RETRY_BUDGET_RATIO: decimalVar(DEFAULT_RETRY_BUDGET.ratio, 0, 100),
  /** The window of the retry budget, in milliseconds. */
  SLUICE_RETRY_BUDGET_WINDOW_MS: intVar(DEFAULT_RETRY_BUDGET.windowMs, 100, 3_600_000),
  /** Retries per second of a resource always within the budget (a floor for quiet resources). */
  SLUICE_RETRY_BUDGET_MIN_PER_SECOND: decimalVar(
    DEFAULT_RETRY_BUDGET.minRetriesPerSecond,
    0,
    100_000,
  ),
  /** Longest a retry over the budget is pushed beyond its backoff, in milliseconds. */
  SLUICE_RETRY_BUDGET_MAX_DEFER_MS: intVar(DEFAULT_RETRY_BUDGET.maxDeferMs, 0, 3_600_000),
};

/** The retry budget a configuration asks for. */
export function retryBudgetConfigOf(config: EnvConfig<typeof RETRY_BUDGET_ENV>): RetryBudgetConfig {
  return {
    ratio: config.SLUICE_RETRY_BUDGET_RATIO,
    windowMs: config.SLUICE_RETRY_BUDGET_WINDOW_MS,
    minRetriesPerSecond: config.SLUICE_RETRY_BUDGET_MIN_PER_SECOND,
    maxDeferMs: config.SLUICE_RETRY_BUDGET_MAX_DEFER_MS,
  };
}
