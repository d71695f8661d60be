/**
 * The settings of Sluice's services that a bench run takes from its environment, and how the
 * report shows them.
 *
 * `SLUICE_PRIORITY_AGING_MS=0 npm run bench -- priority` tunes the services the way an operator
 * would: any `SLUICE_*` variable but the test harness's own (`SLUICE_TEST_*`) reaches them. So do
 * the standard `OTEL_*` variables, so that a run can be traced like a deployment
 * (`OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318`: every task's trace in Jaeger, each hop a
 * span). Both change what is measured (exporting spans costs the services CPU), so the report's
 * command line names them: a figure can be reproduced from it, and one taken while tracing is not
 * mistaken for a plain run's.
 */
import { SECRET_VARIABLE } from '../../../../test/support/secrets.js';

/**
 * The settings the harness gives Sluice's services itself, for the workloads it runs: the
 * governor's `queue_depth` threshold moved from 50,000 ready steps to 1,000,000. The backlog
 * scenarios queue their jobs with no worker running on purpose (the footprint's backlog is
 * 100,000 in the full set), and with the default a deployment sheds new P2/P3 work past 50,000
 * (`RESOURCE_EXHAUSTED`, docs/operations.md) — which is what the default is for, and what an
 * operator who wants such a backlog changes. A variable of the environment replaces it.
 */
export const HARNESS_SETTINGS: Readonly<Record<string, string>> = {
  SLUICE_GOVERNOR_THRESHOLDS: JSON.stringify({
    queue_depth: [{ level: 'reject', enter: 1_000_000, exit: 500_000, dwell_ms: 10_000 }],
  }),
};

/** What the services of a bench stack are given: the harness's settings, then the environment's. */
export function sluiceStackSettings(env: NodeJS.ProcessEnv): Record<string, string> {
  return { ...HARNESS_SETTINGS, ...sluiceServiceSettings(env) };
}

/** The services' settings in `env`, by variable name, in name order. */
export function sluiceServiceSettings(env: NodeJS.ProcessEnv): Record<string, string> {
  return Object.fromEntries(
    Object.entries(env)
      .filter(
        (entry): entry is [string, string] =>
          entry[1] !== undefined &&
          ((entry[0].startsWith('SLUICE_') && !entry[0].startsWith('SLUICE_TEST_')) ||
            entry[0].startsWith('OTEL_')),
      )
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
  );
}

/**
 * The settings as a shell prefix of the command that produced a report (`NAME=value …`), values
 * quoted where the shell needs it and credentials (`SECRET_VARIABLE`, the tests' list) shown as
 * `<redacted>`; empty without settings.
 */
export function settingsPrefix(settings: Readonly<Record<string, string>>): string {
  return Object.entries(settings)
    .map(
      ([name, value]) => `${name}=${SECRET_VARIABLE.test(name) ? '<redacted>' : shellWord(value)}`,
    )
    .join(' ');
}

/** `value` as one shell word: as it is when it has nothing the shell reads, else single-quoted. */
function shellWord(value: string): string {
  return /^[\w@%+=:,./-]+$/.test(value) ? value : `'${value.replaceAll("'", `'\\''`)}'`;
}
