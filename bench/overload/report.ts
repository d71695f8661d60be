/**
 * The overload benchmark's results: the compact table it prints, and the markdown page
 * (docs/benchmarks/overload.md) it writes, with the definitions, the parameters and the machine,
 * so the page is regenerated whole by every run and cannot drift from the script.
 */
import type { MachineFacts } from './machine.js';
import { hiddenCapacity, type OverloadOptions } from './options.js';
import { ms, share, type Percentiles } from './stats.js';

/** Counters of the loaded window: from the flood's first create to the last P3 task finishing. */
export interface LoadWindow {
  readonly seconds: number;
  /**
   * From the flood's first create until every flood key was accepted: longer than asked when
   * creates were rejected and sent again after their delay.
   */
  readonly floodSeconds: number;
  readonly llmCalls: number;
  readonly llm429: number;
  readonly llmSucceeded: number;
  /** The same after the window's first quarter, when the adaptive limit has settled. */
  readonly settledCalls: number;
  readonly settled429: number;
  /** The most LLM calls in flight at once over the whole run. */
  readonly maxInFlight: number;
  /** Governor decisions seen in the window, and how many of them shed, held or throttled P3. */
  readonly decisions: number;
  readonly rejectP3: number;
  readonly holdP3: number;
  readonly throttleP3: number;
  /** Decisions that held or rejected P0 (the design says: never under this load). */
  readonly touchedP0: number;
  /** The governor's reasons in the window, by how many decisions gave each, most frequent first. */
  readonly reasons: ReadonlyArray<readonly [string, number]>;
  /** The adaptive in-flight limit of `llm` the decisions carried: lowest, highest, last. */
  readonly llmLimit: { readonly min: number; readonly max: number; readonly last: number } | null;
}

/** Where a P0 task's wait under load went (first-attempt steps only, whose times are kept). */
export interface WaitSplit {
  /** Task created → its step dispatched by the scheduler (ready queue, admission). */
  readonly toDispatch: Percentiles;
  /** Dispatched → started on the executor (JetStream, a free executor slot). */
  readonly toStart: Percentiles;
}

export interface Integrity {
  /** Distinct idempotency keys the benchmark submitted (idle, flood and stream). */
  readonly keys: number;
  readonly succeeded: number;
  readonly failed: number;
  /** Keys without a succeeded task: must be 0. */
  readonly lost: number;
  readonly tasksInDb: number;
  /** Tasks beyond one per key: must be 0. */
  readonly duplicates: number;
}

export interface OverloadResults {
  readonly options: OverloadOptions;
  readonly startedAt: string;
  readonly runSeconds: number;
  readonly machine: MachineFacts;
  readonly idleWait: Percentiles;
  readonly idleTotal: Percentiles;
  readonly loadWait: Percentiles;
  readonly loadTotal: Percentiles;
  readonly p3Wait: Percentiles;
  readonly loadSplit: WaitSplit;
  readonly window: LoadWindow;
  /** CreateTask answers RESOURCE_EXHAUSTED, by priority (each retried after its RetryInfo delay). */
  readonly rejectedP3: number;
  readonly rejectedP0: number;
  /** Distinct keys answered RESOURCE_EXHAUSTED at least once. */
  readonly rejectedKeys: number;
  /** CreateTask calls that failed otherwise (UNAVAILABLE, deadline) and were retried with the key. */
  readonly createErrors: number;
  readonly integrity: Integrity;
}

/** The governor thresholds the run sets (`SLUICE_GOVERNOR_THRESHOLDS`); others keep defaults. */
export function benchThresholds(options: OverloadOptions): Record<string, unknown> {
  return {
    queue_depth: [
      { level: 'reject', enter: options.rejectEnter, exit: options.rejectExit, dwell_ms: 2_000 },
    ],
  };
}

export function goodput(results: OverloadResults): { perSecond: number; share: number } {
  const perSecond = results.window.llmSucceeded / results.window.seconds;
  return { perSecond, share: perSecond / hiddenCapacity(results.options) };
}

/** True when the run kept its promise: nothing lost, nothing duplicated. */
export function passed(results: OverloadResults): boolean {
  return results.integrity.lost === 0 && results.integrity.duplicates === 0;
}

function row(label: string, p: Percentiles): string[] {
  return [label, String(p.n), ms(p.p50), ms(p.p95), ms(p.p99), ms(p.max)];
}

function table(header: readonly string[], rows: readonly (readonly string[])[]): string[] {
  // At least 3 wide: the shortest delimiter cell prettier writes (the page must pass its check).
  const widths = header.map((h, i) =>
    Math.max(3, h.length, ...rows.map((r) => (r[i] ?? '').length)),
  );
  const line = (cells: readonly string[]) =>
    `| ${cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join(' | ')} |`;
  return [line(header), `| ${widths.map((w) => '-'.repeat(w)).join(' | ')} |`, ...rows.map(line)];
}

function splitTable(results: OverloadResults): string[] {
  return table(
    ['P0 wait under load, split (first attempts)', 'n', 'p50', 'p95', 'p99', 'max'],
    [
      row('created → dispatched (scheduler)', results.loadSplit.toDispatch),
      row('dispatched → started (executor)', results.loadSplit.toStart),
    ],
  );
}

function reasonTable(results: OverloadResults): string[] {
  return table(
    ['governor reason in the loaded window', 'decisions'],
    results.window.reasons.map(([reason, n]) => [reason.replaceAll('|', '\\|'), String(n)]),
  );
}

function waitTable(results: OverloadResults): string[] {
  return table(
    ['wait (create → first step starts)', 'n', 'p50', 'p95', 'p99', 'max'],
    [
      row('P0, idle stack', results.idleWait),
      row('P0, under load', results.loadWait),
      row('P3, under load (once accepted)', results.p3Wait),
    ],
  );
}

function figureTable(results: OverloadResults): string[] {
  const w = results.window;
  const g = goodput(results);
  const i = results.integrity;
  const ratio = results.loadWait.p95 / results.idleWait.p95;
  return table(
    ['figure', 'value'],
    [
      ['P0 wait p95, under load ÷ idle', Number.isFinite(ratio) ? `${ratio.toFixed(1)} ×` : '–'],
      [
        'goodput (successful LLM calls/s ÷ hidden capacity)',
        `${g.perSecond.toFixed(1)}/s ÷ ${hiddenCapacity(results.options).toFixed(1)}/s = ${(g.share * 100).toFixed(0)} %`,
      ],
      [
        '429 share of all LLM calls (loaded window)',
        `${share(w.llm429, w.llmCalls)} of ${w.llmCalls}`,
      ],
      [
        '429 share after the first quarter (settled)',
        `${share(w.settled429, w.settledCalls)} of ${w.settledCalls}`,
      ],
      [
        'most LLM calls in flight at once',
        `${w.maxInFlight} (hidden limit ${results.options.llmConcurrency})`,
      ],
      [
        'P3 creates rejected (RESOURCE_EXHAUSTED, retried after RetryInfo)',
        `${results.rejectedP3} answers, ${results.rejectedKeys} distinct keys`,
      ],
      ['P0 creates rejected', String(results.rejectedP0)],
      ['other create errors (retried with the key)', String(results.createErrors)],
      [
        'governor decisions in the window: P3 rejected / held / throttled',
        `${share(w.rejectP3, w.decisions)} / ${share(w.holdP3, w.decisions)} / ${share(w.throttleP3, w.decisions)} of ${w.decisions}`,
      ],
      ['decisions that held or rejected P0', String(w.touchedP0)],
      [
        'adaptive LLM limit in the window (min–max, last)',
        w.llmLimit ? `${w.llmLimit.min}–${w.llmLimit.max}, ${w.llmLimit.last}` : '–',
      ],
      [
        'loaded window (flood start → last P3 finished)',
        `${w.seconds.toFixed(1)} s (every flood create accepted after ${w.floodSeconds.toFixed(1)} s)`,
      ],
      ['keys submitted / tasks succeeded / failed', `${i.keys} / ${i.succeeded} / ${i.failed}`],
      ['tasks lost (must be 0)', String(i.lost)],
      ['tasks in the database / duplicates (must be 0)', `${i.tasksInDb} / ${i.duplicates}`],
    ],
  );
}

/** The compact summary for stdout. */
export function summaryLines(results: OverloadResults): string[] {
  return [
    ...waitTable(results),
    '',
    ...figureTable(results),
    '',
    ...splitTable(results),
    '',
    ...reasonTable(results),
    '',
    machineLine(results.machine),
    passed(results) ? 'PASS: no task lost, none duplicated' : 'FAIL: tasks lost or duplicated',
  ];
}

function machineLine(m: MachineFacts): string {
  return (
    `machine: ${m.cpu}, ${m.cores} cores, ${m.memoryGiB} GiB, ${m.os}; node ${m.node}; ` +
    `nats-server ${m.nats}; ${m.postgres}; load average ${m.loadAtStart.toFixed(2)} → ${m.loadAtEnd.toFixed(2)}`
  );
}

/**
 * Marks the start of the page's hand-written part: what a person concluded from a run (causes,
 * links to issues) survives the next run, which regenerates everything above it.
 */
export const NOTES_MARKER =
  '<!-- Notes below this line are kept when the benchmark rewrites the page. -->';

/** The hand-written part of an earlier page (from {@link NOTES_MARKER} on), or ''. */
export function keptNotes(previous: string): string {
  const at = previous.indexOf(NOTES_MARKER);
  return at < 0 ? '' : previous.slice(at + NOTES_MARKER.length).trim();
}

/** The whole markdown page; `notes` is the hand-written part kept from the previous page. */
export function markdown(results: OverloadResults, notes = ''): string {
  const o = results.options;
  const m = results.machine;
  const shared = Math.max(m.loadAtStart, m.loadAtEnd) > m.cores * 0.75;
  const thresholds = JSON.stringify(benchThresholds(o));
  const lines = [
    '# Overload benchmark',
    '',
    '<!-- Written by `npm run bench:overload` (bench/overload/report.ts); only the notes at the end are kept. -->',
    '',
    'What ARCHITECTURE.md invariant 6 promises, measured: under overload, P0 wait stays bounded',
    'relative to an idle system while P3 is held or rejected, and nothing is dropped silently.',
    'The scenario is that of `test/e2e/overload.test.ts`, timed instead of counted.',
    '',
    `Run ${results.startedAt}, ${results.runSeconds.toFixed(0)} s in all.` +
      (o.note ? ` ${o.note}` : ''),
    '',
    '## Results',
    '',
    ...waitTable(results),
    '',
    ...figureTable(results),
    '',
    passed(results)
      ? 'No task was lost and none duplicated: every submitted key is exactly one task, and it succeeded.'
      : '**Tasks were lost or duplicated in this run** (see the table).',
    '',
    '## Machine',
    '',
    `- CPU: ${m.cpu}, ${m.cores} cores; ${m.memoryGiB} GiB memory; ${m.os}`,
    `- Node ${m.node}; nats-server ${m.nats}; ${m.postgres}`,
    `- 1-minute load average ${m.loadAtStart.toFixed(2)} at the start, ${m.loadAtEnd.toFixed(2)} at the end` +
      (shared
        ? ': **the machine was shared with other work**, so absolute times are pessimistic.'
        : '.'),
    '- Every service (gateway, scheduler, governor, one `llm` executor) is its own Node process on',
    '  this machine, beside NATS, Postgres, the fake LLM and the benchmark itself.',
    '',
    '## Scenario and definitions',
    '',
    `- **Hidden limit.** A fake OpenAI-compatible LLM (test/support/fake-llm-server.ts) answers`,
    `  every admitted call after a fixed latency L = ${o.llmLatencyMs} ms and answers 429 (with`,
    `  \`retry-after-ms: ${o.llmRetryAfterMs}\`) at once to a call arriving while C = ${o.llmConcurrency} are in flight.`,
    `  Sluice is not told C: its executor finds it with its adaptive (AIMD) limit. The hidden`,
    `  capacity is C / L = ${hiddenCapacity(o).toFixed(1)} successful calls per second.`,
    '- **Task.** `bp-llm` (test/e2e/backpressure-task-types.ts): one step on `llm` that calls the',
    '  model once; a 429 fails the attempt as `llm_rate_limit` and the step is retried by class.',
    `- **Idle P0 wait.** ${o.idleP0} P0 tasks, one at a time (the next once the last succeeded), on`,
    '  the otherwise idle stack, after 3 unmeasured warm-up tasks.',
    '- **Wait** of a task: from its `created_at` (the CreateTask transaction) to its `started_at`',
    '  (the first start of its first step on an executor), both Postgres timestamps. "Total" below',
    '  is created → finished.',
    `- **Load.** A P3 flood of ${o.p3} tasks submitted evenly over ${o.floodSeconds} s`,
    `  (${(o.p3 / o.floodSeconds).toFixed(0)}/s, ${(o.p3 / o.floodSeconds / hiddenCapacity(o)).toFixed(1)} × the hidden capacity) and, beside it, a steady`,
    `  stream of ${o.p0PerSecond} P0 tasks per second for as long as any P3 task is unfinished.`,
    '  A create answered `RESOURCE_EXHAUSTED` is sent again with the same idempotency key after the',
    '  delay its `google.rpc.RetryInfo` names, until it is taken.',
    "- **Loaded window.** From the flood's first create to the moment the last P3 task had",
    '  finished (seen by a poll every second).',
    '- **Goodput.** Successful LLM calls per second in the loaded window (P0 and P3, retries',
    '  included) ÷ the hidden capacity.',
    '- **429 share.** 429s ÷ all LLM calls in the loaded window; "settled": the same after its',
    '  first quarter, once the adaptive limit has found the hidden one.',
    '- **Tasks lost.** Keys submitted − tasks of those keys that succeeded; duplicates: tasks in',
    '  the database − distinct keys. Both must be 0.',
    '',
    '## Configuration',
    '',
    'Product defaults (docs/operations.md) except:',
    '',
    `- \`SLUICE_GOVERNOR_THRESHOLDS=${thresholds}\`: reject P2/P3 creates when more than`,
    `  ${o.rejectEnter} steps are ready (${(o.rejectEnter / hiddenCapacity(o)).toFixed(0)} s of hidden capacity), until fewer than ${o.rejectExit} are. The`,
    '  default (50,000) is sized for large deployments and would never trip at this scale. The',
    '  `llm_rate_limit` thresholds keep their defaults: throttle at 5 % 429s (exit 2 %), degrade at',
    "  15 % (5 %), hold P3 at 30 % (10 %), over the governor's 10 s window, 10 s dwell.",
    '- `SLUICE_TASK_MODULES` = the backpressure task types; the stack runs only an `llm` executor',
    '  (8 slots, adaptive LLM limit starting at 8, i.e. above the hidden 4).',
    '',
    '## Reproduce',
    '',
    '```sh',
    `npm run bench:overload -- --p3 ${o.p3} --flood-seconds ${o.floodSeconds} --p0-per-second ${o.p0PerSecond} --idle-p0 ${o.idleP0} \\`,
    `  --llm-concurrency ${o.llmConcurrency} --llm-latency-ms ${o.llmLatencyMs} --reject-enter ${o.rejectEnter} --reject-exit ${o.rejectExit}`,
    '```',
    '',
    'It needs Postgres and NATS as `npm test` does (DATABASE_URL / NATS_URL, or the local',
    'defaults), starts the whole stack in a fresh database and a fresh NATS prefix, and removes',
    'both at the end, also when it fails or is interrupted. `--out ""` skips writing this page;',
    '`--help` lists every flag.',
    '',
    '## Details',
    '',
    ...table(
      ['total (create → finished)', 'n', 'p50', 'p95', 'p99', 'max'],
      [row('P0, idle stack', results.idleTotal), row('P0, under load', results.loadTotal)],
    ),
    '',
    ...splitTable(results),
    '',
    ...reasonTable(results),
    '',
    NOTES_MARKER,
    '',
    ...(notes === '' ? [] : [notes, '']),
  ];
  return `${lines.join('\n').trimEnd()}\n`;
}
