/**
 * Every service's entry point, started as a real process with one bad environment variable, refuses
 * to start: exit code 2 and exactly one line on stderr naming the variable, nothing on stdout.
 *
 * The other variables are valid, but the database they name does not exist: a service that wrongly
 * accepted the bad value would fail to connect and exit 1 (or be still running at the deadline),
 * so these tests fail loudly rather than start a stack.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { natsUrl, uniquePrefix } from '@sluice/bus/testing';
import { adminDatabaseUrl, databaseUrlFor } from '@sluice/db/testing';
import { ensureServiceBundles } from '@sluice/service-bundles';
import { ServiceProcess } from '../support/service-process.js';

/**
 * Starting a service (from its bundle) and failing the configuration takes well under a second;
 * with margin.
 */
const EXIT_DEADLINE_MS = 30_000;
/** Exit code of a configuration error (`EXIT_CONFIG` in @sluice/runtime). */
const EXIT_CONFIG = 2;

/** Valid values of every variable the services require or commonly get. */
const BASELINE: Record<string, string> = {
  NATS_URL: natsUrl(),
  DATABASE_URL: databaseUrlFor(adminDatabaseUrl(), 'sluice_config_errors_never_created'),
  SLUICE_PREFIX: uniquePrefix('config_errors'),
  SLUICE_LOG_LEVEL: 'info',
  SLUICE_METRICS_PORT: '0',
  SLUICE_GRPC_PORT: '0',
  SLUICE_LLM_BASE_URL: 'http://127.0.0.1:9/v1',
};

/** One bad start: the service, its arguments, the environment's changes, what the line names. */
interface Case {
  readonly service: 'gateway' | 'scheduler' | 'executor' | 'governor';
  readonly args: readonly string[];
  /** Variables set (a string) or removed (`undefined`) from the baseline. */
  readonly env: Readonly<Record<string, string | undefined>>;
  /** The name the stderr line must contain. */
  readonly names: RegExp;
  readonly title: string;
}

/** `service` with `variable` set to `value`, or unset when `value` is `undefined`. */
function bad(
  service: Case['service'],
  variable: string,
  value: string | undefined,
  args: readonly string[] = [],
): Case {
  const shown = value === undefined ? `${variable} unset` : `${variable}=${value}`;
  return {
    service,
    args,
    env: { [variable]: value },
    names: new RegExp(`\\b${variable}\\b`),
    title: `${[service, ...args].join(' ')} with ${shown}`,
  };
}

const LLM = ['--resource', 'llm'];

// Each variable's parsing is unit-tested with the loader (@sluice/runtime); here every entry point
// shows it wires the loader to the process's exit, for common and for its own variables.
const CASES: readonly Case[] = [
  bad('gateway', 'NATS_URL', 'http://x'),
  bad('gateway', 'SLUICE_PREFIX', 'Bad-Prefix'),
  bad('gateway', 'SLUICE_LOG_LEVEL', 'loud'),
  bad('gateway', 'SLUICE_GRPC_PORT', '99999'),
  bad('gateway', 'SLUICE_GRPC_PORT', '50051x'),
  bad('gateway', 'SLUICE_MAX_INPUT_BYTES', '1'),
  bad('scheduler', 'DATABASE_URL', 'mysql://127.0.0.1/sluice'),
  bad('scheduler', 'SLUICE_SCHEDULER_BATCH', '0'),
  bad('scheduler', 'SLUICE_LEASE_TTL_MS', '500'),
  bad('scheduler', 'SLUICE_RETENTION_AGE', '7 days'),
  bad('scheduler', 'SLUICE_TOMBSTONE_TTL', '10s'),
  bad('executor', 'NATS_URL', 'http://x', LLM),
  bad('executor', 'SLUICE_EXECUTOR_SLOTS', '0', LLM),
  bad('executor', 'SLUICE_LLM_BASE_URL', 'ftp://x', LLM),
  bad('executor', 'SLUICE_RESOURCE', 'Bad.Res'),
  bad('executor', 'SLUICE_RESOURCE', undefined),
  {
    service: 'executor',
    args: ['--resource', 'Bad.Res'],
    env: {},
    // The flag stands in for the variable; either name tells the operator where to look.
    names: /\bSLUICE_RESOURCE\b|--resource\b/,
    title: 'executor --resource Bad.Res',
  },
  bad('governor', 'SLUICE_PREFIX', 'Bad-Prefix'),
  bad('governor', 'SLUICE_METRICS_PORT', '-1'),
  bad('governor', 'SLUICE_GOVERNOR_THRESHOLDS', '{"cpu":[]}'),
  bad(
    'governor',
    'SLUICE_GOVERNOR_THRESHOLDS',
    '{"queue_depth":[{"level":"reject","enter":1,"exit":5}]}',
  ),
  bad('executor', 'SLUICE_LLM_INITIAL_CONCURRENCY', '100', LLM),
  bad('scheduler', 'SLUICE_DECISION_STALE_MS', '10'),
  bad('gateway', 'SLUICE_STARTUP_REPORT_MS', '0'),
];

before(() => ensureServiceBundles());

/** Every process this file started, killed in `after` whatever happened. */
const started = new Set<ServiceProcess>();
after(() => {
  for (const process of started) process.kill('SIGKILL');
});

/** Starts the case's service and waits for it to exit (killing it at the deadline). */
async function run(c: Case): Promise<{ process: ServiceProcess; code: number | null }> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries({ ...BASELINE, ...c.env })) {
    if (value !== undefined) env[name] = value;
  }
  const process = new ServiceProcess({ name: c.title, service: c.service, args: c.args, env });
  started.add(process);
  const timer = setTimeout(() => process.kill('SIGKILL'), EXIT_DEADLINE_MS);
  try {
    const { code, signal } = await process.exited;
    assert.equal(signal, null, `${c.service} did not exit within ${EXIT_DEADLINE_MS} ms`);
    return { process, code };
  } finally {
    clearTimeout(timer);
    started.delete(process);
  }
}

function describeOutput(process: ServiceProcess): string {
  const stdout = process.lines.map((line) => JSON.stringify(line)).join('\n');
  return `--- stdout ---\n${stdout}\n--- stderr ---\n${process.stderr.join('\n')}`;
}

// Each case is its own process; two at a time keep a small machine busy without starving it.
describe(
  'a bad configuration stops each service: exit 2, one stderr line naming the variable',
  {
    concurrency: 2,
  },
  () => {
    for (const c of CASES) {
      it(c.title, async () => {
        const { process, code } = await run(c);
        assert.equal(code, EXIT_CONFIG, `exit code 2\n${describeOutput(process)}`);
        assert.equal(process.stderr.length, 1, `one stderr line\n${describeOutput(process)}`);
        const [line = ''] = process.stderr;
        assert.match(line, c.names, 'the line names it');
        assert.ok(
          line.startsWith(`${c.service}: configuration error: `),
          `the line says which service and that it is the configuration: ${line}`,
        );
        assert.deepEqual(process.lines, [], 'nothing on stdout: the service never started');
      });
    }
  },
);
