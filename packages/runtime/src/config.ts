/**
 * Configuration from environment variables, validated at start. Each service declares which
 * variables it reads with a zod schema per variable; a bad value stops the service with one line
 * naming the variable.
 */
import { z } from 'zod';
import { prefixProblem } from '@sluice/core';
import { LOG_LEVELS } from '@sluice/telemetry';

/** A variable's schema (the raw value is a string or undefined). */
export type EnvSchema = Record<string, z.ZodType>;

/** The parsed configuration of a schema. */
export type EnvConfig<S extends EnvSchema> = { [K in keyof S]: z.output<S[K]> };

/** Thrown by {@link loadEnvConfig}; its message is the one line to print. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(
    readonly variable: string,
    problem: string,
  ) {
    super(`configuration error: ${variable}: ${problem}`);
  }
}

/**
 * Parses `env` with `schema`, whose keys are the variable names. Throws a {@link ConfigError} for the
 * first variable that is invalid.
 */
export function loadEnvConfig<S extends EnvSchema>(
  schema: S,
  env: Record<string, string | undefined> = process.env,
): EnvConfig<S> {
  const config: Record<string, unknown> = {};
  for (const [variable, variableSchema] of Object.entries(schema)) {
    const raw = env[variable];
    const parsed = variableSchema.safeParse(raw === '' ? undefined : raw);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new ConfigError(variable, issue ? issue.message : 'invalid value');
    }
    config[variable] = parsed.data;
  }
  return config as EnvConfig<S>;
}

/** Whether `value` is a URL with one of `protocols`. */
function isUrlWithProtocol(value: string, protocols: readonly string[]): boolean {
  try {
    return protocols.includes(new URL(value).protocol);
  } catch {
    return false;
  }
}

/** A URL with one of the given protocols. */
export function urlVar(protocols: readonly string[], fallback?: string) {
  const schema = z.string().refine((value) => isUrlWithProtocol(value, protocols), {
    message: `must be a URL with protocol ${protocols.join(' or ')}`,
  });
  return fallback === undefined ? schema : schema.default(fallback);
}

/**
 * One or more URLs with one of the given protocols, separated by commas (`NATS_URL`: the members of
 * a cluster, `nats://a:4222,nats://b:4222`); the text is kept as given, for the client to split.
 */
export function urlListVar(protocols: readonly string[], fallback: string) {
  const accepted = (value: string) => isUrlWithProtocol(value, protocols);
  return z
    .string()
    .default(fallback)
    .refine(
      (value) => {
        const urls = value.split(',').map((url) => url.trim());
        return urls.some((url) => url !== '') && urls.every((url) => url === '' || accepted(url));
      },
      {
        message: `must be a URL with protocol ${protocols.join(' or ')}, or several separated by commas`,
      },
    );
}

/** A whole number in [min, max], given as decimal text. */
export function intVar(fallback: number, min: number, max: number) {
  return z
    .string()
    .default(String(fallback))
    .refine((value) => /^-?\d+$/.test(value.trim()), { message: 'must be a whole number' })
    .transform((value) => Number(value.trim()))
    .refine((value) => value >= min && value <= max, {
      message: `must be between ${min} and ${max}`,
    });
}

const DURATION_UNITS_MS: Record<string, number> = {
  ms: 1,
  s: 1_000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
};

/**
 * A duration as a whole number with a unit (`500ms`, `45s`, `30m`, `12h`, `7d`), parsed to
 * milliseconds, in [minMs, maxMs]; `fallback` is written the same way.
 */
export function durationVar(fallback: string, minMs: number, maxMs: number) {
  return z
    .string()
    .default(fallback)
    .transform((value, ctx) => {
      const match = /^(\d+)\s*(ms|s|m|h|d)$/.exec(value.trim());
      const unit = match?.[2];
      if (!match || unit === undefined) {
        ctx.addIssue({
          code: 'custom',
          message: 'must be a whole number with a unit: ms, s, m, h or d (e.g. 7d)',
        });
        return z.NEVER;
      }
      return Number(match[1]) * (DURATION_UNITS_MS[unit] ?? 1);
    })
    .refine((ms) => ms >= minMs && ms <= maxMs, {
      message: `must be between ${formatDuration(minMs)} and ${formatDuration(maxMs)}`,
    });
}

/** The largest whole unit a duration is written in (`7d`, `90m`). */
function formatDuration(ms: number): string {
  const units = Object.entries(DURATION_UNITS_MS).reverse();
  for (const [unit, size] of units) if (ms % size === 0) return `${ms / size}${unit}`;
  return `${ms}ms`;
}

/** One of a fixed set of words. */
export function enumVar<const T extends readonly [string, ...string[]]>(
  values: T,
  fallback: T[number],
) {
  return z.enum(values, { message: `must be one of ${values.join(', ')}` }).default(fallback);
}

/** A non-empty string. */
export function stringVar(fallback?: string) {
  const schema = z.string().min(1, { message: 'must not be empty' });
  return fallback === undefined ? schema : schema.default(fallback);
}

/** The name prefix of every subject, stream and bucket (`sluice` unless a test isolates itself). */
export function prefixVar() {
  return z
    .string()
    .default('sluice')
    .superRefine((value, ctx) => {
      const problem = prefixProblem(value);
      if (problem) ctx.addIssue({ code: 'custom', message: problem });
    });
}

/**
 * The urgent reserve, read by the scheduler (a share of each resource's limit) and by every
 * executor (a share of its slots): P1–P3 steps are admitted and started only while this percent
 * of the capacity, rounded down (none under 100 / percent), stays free after them; P0 may take
 * every slot, so interactive work starts at once under a flood of batch work.
 */
export const URGENT_RESERVE_ENV = {
  SLUICE_URGENT_RESERVE_PERCENT: intVar(10, 0, 50),
} satisfies EnvSchema;

/**
 * Admission's limits, read by the scheduler (every claim) and by the gateway (the claim of a
 * create's P0 steps in its own transaction): the two must agree, or the gateway would admit P0
 * work above the scheduler's limit — give both services the same values.
 */
export const ADMISSION_ENV = {
  /**
   * In-flight (dispatched + running) steps allowed per resource class that has no row in
   * `resource_limits`, across all replicas.
   */
  SLUICE_DEFAULT_RESOURCE_LIMIT: intVar(64, 1, 1_000_000),
  /**
   * Priority aging: a ready step counts one priority level more urgent per this many ms it has
   * waited past its due time (so no priority starves while capacity is free); 0 turns aging off.
   */
  SLUICE_PRIORITY_AGING_MS: intVar(30_000, 0, 86_400_000),
  /** Percent of each resource's limit a priority the governor throttles leaves free. */
  SLUICE_THROTTLE_RESERVE_PERCENT: intVar(25, 0, 100),
  ...URGENT_RESERVE_ENV,
} satisfies EnvSchema;

/** The configured admission, in the terms of a claim's settings (`AdmissionSettings` of the db). */
export function configuredAdmission(config: EnvConfig<typeof ADMISSION_ENV>) {
  return {
    defaultResourceLimit: config.SLUICE_DEFAULT_RESOURCE_LIMIT,
    agingMs: config.SLUICE_PRIORITY_AGING_MS,
    throttleReserve: config.SLUICE_THROTTLE_RESERVE_PERCENT / 100,
    urgentReserve: config.SLUICE_URGENT_RESERVE_PERCENT / 100,
  };
}

/**
 * Connections of a service's Postgres pool, at least 2: the scheduler's claim and an executor's
 * outcome writer each keep one of theirs for themselves, and need another for everything else.
 */
export function poolSizeVar(fallback: number) {
  return intVar(fallback, 2, 1_000);
}

/** The variables every service reads. */
export const COMMON_ENV = {
  /** One server or several, comma-separated (every member of a cluster). */
  NATS_URL: urlListVar(['nats:', 'tls:', 'ws:', 'wss:'], 'nats://127.0.0.1:4222'),
  DATABASE_URL: urlVar(['postgres:', 'postgresql:'], 'postgres://postgres@127.0.0.1:5432/sluice'),
  SLUICE_PREFIX: prefixVar(),
  SLUICE_LOG_LEVEL: enumVar(LOG_LEVELS, 'info'),
  /** Port of the Prometheus `/metrics` endpoint; 0 picks a free one. */
  SLUICE_METRICS_PORT: intVar(0, 0, 65_535),
  /** Interface of the `/metrics` endpoint (`0.0.0.0` where Prometheus scrapes from elsewhere). */
  SLUICE_METRICS_HOST: stringVar('127.0.0.1'),
  /** Age after which a governor decision is no longer obeyed (no governor is acting). */
  SLUICE_DECISION_STALE_MS: intVar(10_000, 1_000, 600_000),
  /** How long a start-up step may take before the service logs what it waits for, and how often. */
  SLUICE_STARTUP_REPORT_MS: intVar(10_000, 100, 600_000),
  /**
   * Connections the service may open to Postgres (the governor's own default is 2). Each service
   * opens them as its statements need them: a busy one holds them all (docs/operations.md, sizing).
   */
  SLUICE_DB_POOL_SIZE: poolSizeVar(10),
} satisfies EnvSchema;
