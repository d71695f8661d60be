/**
 * Configuration of an executor, from the environment (see docs/operations.md for every variable).
 */
import { z } from 'zod';
import { resourceProblem } from '@sluice/core';
import {
  COMMON_ENV,
  URGENT_RESERVE_ENV,
  ConfigError,
  intVar,
  loadEnvConfig,
  stringVar,
  urlVar,
  type EnvConfig,
} from '@sluice/runtime';

/** Steps one executor process runs at once unless configured. */
export const DEFAULT_SLOTS = 8;
/** How often running steps record a heartbeat in Postgres. */
export const DEFAULT_HEARTBEAT_MS = 5_000;
/** The built-in sample task types. */
export const BUILTIN_TASK_MODULE = new URL('./builtin-tasks/index.ts', import.meta.url).href;

export const EXECUTOR_ENV = {
  ...COMMON_ENV,
  ...URGENT_RESERVE_ENV,
  /** The resource class this process executes (`llm`, `tool:http` …); `--resource` overrides it. */
  SLUICE_RESOURCE: z
    .string({ message: 'is required: the resource class to run (or pass --resource <name>)' })
    .superRefine((value, ctx) => {
      const problem = resourceProblem(value);
      if (problem)
        ctx.addIssue({
          code: 'custom',
          message: `${problem} (from SLUICE_RESOURCE or --resource)`,
        });
    }),
  SLUICE_EXECUTOR_SLOTS: intVar(DEFAULT_SLOTS, 1, 1_000),
  /**
   * Messages one pull request of a priority's consumer asks for, and how many of a priority may
   * wait here for a slot; 0: half the slots (see `defaultPullBatch`).
   */
  SLUICE_EXECUTOR_PULL_BATCH: intVar(0, 0, 1_000).transform((v) => v || undefined),
  /** Comma-separated modules exporting task definitions (paths or package names). */
  SLUICE_TASK_MODULES: z
    .string()
    .default(BUILTIN_TASK_MODULE)
    .transform((value) =>
      value
        .split(',')
        .map((m) => m.trim())
        .filter((m) => m.length > 0),
    )
    .refine((modules) => modules.length > 0, { message: 'must name at least one module' }),
  SLUICE_LLM_BASE_URL: urlVar(['http:', 'https:'], 'http://127.0.0.1:8080/v1'),
  SLUICE_LLM_API_KEY: z.string().optional(),
  SLUICE_LLM_MODEL: stringVar('gpt-4o-mini'),
  SLUICE_ACK_WAIT_MS: intVar(30_000, 1_000, 3_600_000),
  SLUICE_MAX_DELIVER: intVar(5, 1, 100),
  SLUICE_HEARTBEAT_MS: intVar(DEFAULT_HEARTBEAT_MS, 100, 600_000),
  /** The LLM gate: bounds and start of the adaptive concurrency limit (AIMD on 429s). */
  SLUICE_LLM_MIN_CONCURRENCY: intVar(1, 1, 1_000),
  SLUICE_LLM_MAX_CONCURRENCY: intVar(64, 1, 1_000),
  SLUICE_LLM_INITIAL_CONCURRENCY: intVar(8, 1, 1_000),
  /** Percent the limit keeps on a 429 (90: multiplied by 0.9). */
  SLUICE_LLM_BACKOFF_PERCENT: intVar(90, 1, 99),
  /**
   * Three successful LLM calls in a row slower than this percent of the fastest seen decrease the
   * limit like a 429 (rising latency: the provider queues); 0 turns it off. At 100 or less nearly
   * every success would count as slow and hold the limit at its minimum: refused.
   */
  SLUICE_LLM_LATENCY_TOLERANCE_PERCENT: intVar(400, 0, 100_000).refine(
    (percent) => percent === 0 || percent > 100,
    { message: 'must be 0 (off) or above 100 (percent of the fastest latency seen)' },
  ),
  /** Shortest time between two decreases (one burst of 429s is one drop). */
  SLUICE_LLM_DECREASE_INTERVAL_MS: intVar(1_000, 0, 60_000),
  /** The provider's request and token budgets per minute, for this executor; unset: unlimited. */
  SLUICE_LLM_REQUESTS_PER_MINUTE: intVar(0, 0, 100_000_000).transform((v) => v || undefined),
  SLUICE_LLM_TOKENS_PER_MINUTE: intVar(0, 0, 1_000_000_000).transform((v) => v || undefined),
  /** How often the executor reports its load and outcomes to the governor. */
  SLUICE_REPORT_INTERVAL_MS: intVar(1_000, 100, 60_000),
};

export type ExecutorConfig = EnvConfig<typeof EXECUTOR_ENV>;

/** Why the LLM gate's bounds cannot work together, or `undefined`. */
function llmBoundsProblem(config: ExecutorConfig): string | undefined {
  const min = config.SLUICE_LLM_MIN_CONCURRENCY;
  const max = config.SLUICE_LLM_MAX_CONCURRENCY;
  const initial = config.SLUICE_LLM_INITIAL_CONCURRENCY;
  if (min <= initial && initial <= max) return undefined;
  return `SLUICE_LLM_MIN_CONCURRENCY (${min}) ≤ SLUICE_LLM_INITIAL_CONCURRENCY (${initial}) ≤ SLUICE_LLM_MAX_CONCURRENCY (${max}) must hold`;
}

/** Reads the configuration; `--resource <name>` on the command line wins over SLUICE_RESOURCE. */
export function loadExecutorConfig(
  env: Record<string, string | undefined> = process.env,
  argv: readonly string[] = process.argv.slice(2),
): ExecutorConfig {
  const flag = argv.indexOf('--resource');
  const resource = flag >= 0 ? argv[flag + 1] : undefined;
  const config = loadEnvConfig(
    EXECUTOR_ENV,
    resource === undefined ? env : { ...env, SLUICE_RESOURCE: resource },
  );
  const problem = llmBoundsProblem(config);
  if (problem) throw new ConfigError('SLUICE_LLM_INITIAL_CONCURRENCY', problem);
  return config;
}
