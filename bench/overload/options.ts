/**
 * The overload benchmark's parameters: command-line flags (`--name value`), each with a default
 * that finishes within a few minutes on a two-core machine.
 */
import { parseArgs } from 'node:util';

/** Everything one run is parameterised by. */
export interface OverloadOptions {
  /** Hidden limit C: LLM calls answered at once; one more gets a 429. */
  readonly llmConcurrency: number;
  /** Fixed latency L of every admitted LLM call, in ms. */
  readonly llmLatencyMs: number;
  /** The `retry-after-ms` of the fake's 429s. */
  readonly llmRetryAfterMs: number;
  /** P0 tasks run one at a time on the idle stack. */
  readonly idleP0: number;
  /** P3 tasks of the flood. */
  readonly p3: number;
  /** Seconds over which the flood is submitted. */
  readonly floodSeconds: number;
  /** P0 tasks per second while the load lasts. */
  readonly p0PerSecond: number;
  /** Ready steps at which P2/P3 creates are rejected (`queue_depth` reject enter). */
  readonly rejectEnter: number;
  /** Ready steps below which they are taken again (`queue_depth` reject exit). */
  readonly rejectExit: number;
  /** Give up waiting for the tasks after this many seconds (the run then fails). */
  readonly timeoutSeconds: number;
  /** Where the markdown report goes; empty: not written. */
  readonly out: string;
  /** A free-text remark for the report (e.g. "machine shared with other jobs"). */
  readonly note: string;
  /** Print the services' logs. */
  readonly echo: boolean;
}

export const USAGE = `usage: npm run bench:overload -- [flags]
  --llm-concurrency C     hidden limit: LLM calls at once (default 4)
  --llm-latency-ms L      latency of each LLM call (default 200)
  --llm-retry-after-ms R  retry-after of the fake's 429s (default 500)
  --idle-p0 N             P0 tasks, one at a time, on the idle stack (default 50)
  --p3 N                  P3 tasks in the flood (default 2000)
  --flood-seconds S       the flood is submitted over S seconds (default 20)
  --p0-per-second R       P0 stream while the load lasts (default 2)
  --reject-enter N        ready steps at which P2/P3 creates are rejected (default 300)
  --reject-exit N         ready steps below which they are accepted again (default 150)
  --timeout-seconds S     give up after S seconds of load (default 900)
  --out PATH              markdown report (default docs/benchmarks/overload.md; "" for none)
  --note TEXT             a remark written into the report
  --echo                  print the services' logs`;

const DEFAULTS = {
  'llm-concurrency': 4,
  'llm-latency-ms': 200,
  'llm-retry-after-ms': 500,
  'idle-p0': 50,
  p3: 2_000,
  'flood-seconds': 20,
  'p0-per-second': 2,
  'reject-enter': 300,
  'reject-exit': 150,
  'timeout-seconds': 900,
} as const;

type NumericFlag = keyof typeof DEFAULTS;

/**
 * Reads the flags.
 *
 * @throws Error with the usage for an unknown flag or a value that is not a positive number.
 */
export function parseOverloadOptions(argv: readonly string[], repoRoot: string): OverloadOptions {
  const numeric = Object.fromEntries(
    Object.keys(DEFAULTS).map((name) => [name, { type: 'string' as const }]),
  ) as Record<NumericFlag, { type: 'string' }>;
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      options: {
        ...numeric,
        out: { type: 'string' },
        note: { type: 'string' },
        echo: { type: 'boolean' },
        help: { type: 'boolean' },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (error) {
    throw new Error(`${(error as Error).message}\n${USAGE}`, { cause: error });
  }
  if (values.help === true) throw new Error(USAGE);
  const number = (name: NumericFlag, whole = true): number => {
    const raw = values[name];
    if (raw === undefined) return DEFAULTS[name];
    const value = Number(raw);
    if (!(value > 0) || !Number.isFinite(value) || (whole && !Number.isSafeInteger(value))) {
      throw new Error(
        `--${name} must be a positive ${whole ? 'whole ' : ''}number, not "${String(raw)}"\n${USAGE}`,
      );
    }
    return value;
  };
  const options: OverloadOptions = {
    llmConcurrency: number('llm-concurrency'),
    llmLatencyMs: number('llm-latency-ms'),
    llmRetryAfterMs: number('llm-retry-after-ms'),
    idleP0: number('idle-p0'),
    p3: number('p3'),
    floodSeconds: number('flood-seconds', false),
    p0PerSecond: number('p0-per-second', false),
    rejectEnter: number('reject-enter'),
    rejectExit: number('reject-exit'),
    timeoutSeconds: number('timeout-seconds'),
    out: values.out === undefined ? `${repoRoot}/docs/benchmarks/overload.md` : String(values.out),
    note: typeof values.note === 'string' ? values.note : '',
    echo: values.echo === true,
  };
  if (options.rejectExit >= options.rejectEnter) {
    throw new Error('--reject-exit must be below --reject-enter');
  }
  return options;
}

/** The hidden capacity C / L, in successful LLM calls per second. */
export function hiddenCapacity(options: OverloadOptions): number {
  return options.llmConcurrency / (options.llmLatencyMs / 1_000);
}
