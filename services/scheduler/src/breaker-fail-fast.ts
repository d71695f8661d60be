/**
 * Fail-fast while a circuit breaker is open (issue 5, "or they fail fast as retryable if the task
 * prefers"). The claim leaves the steps of a resource whose breaker is open in the ready queue,
 * where they wait; this pass fails, instead, the ready steps that declare `whileBreakerOpen:
 * 'fail'`, without dispatching them (see `failStepWhileBreakerOpen` in `@sluice/db`). The outcome
 * applier then retries each by its class (`external_5xx`) and attempts, or fails the task for good
 * when they ran out, exactly as for a failure an executor recorded.
 *
 * The delay before the retry: the rest of the breaker's cool-down when the governor's `breakers`
 * row has one (a retry before then would only fail fast again), else the step's backoff. The
 * decision document is left as it is: it says which breakers are open, Postgres says until when.
 *
 * Each step is failed in its own transaction, locking one task: no lock-order question with the
 * outcome applier, which locks several tasks per batch. Several replicas may run the pass: the
 * task lock, `SKIP LOCKED` on the step and the re-checks fail a step at most once.
 */
import { failStepWhileBreakerOpen, findFailFastSteps, type Database } from '@sluice/db';
import type { Logger } from '@sluice/telemetry';

/** What the pass needs. */
export interface BreakerFailFastDeps {
  readonly db: Database;
  readonly log: Logger;
  readonly batchSize: number;
  /** Resources whose breaker is open now (from the governor's live decision). */
  readonly openResources: () => readonly string[];
  /** Called after failures were recorded, so the outcome applier runs at once. */
  readonly onOutcomesRecorded: () => void;
}

/** The resources with an open breaker in a decision's `breakers` (half-open ones admit probes). */
export function openBreakerResources(
  breakers: Readonly<Record<string, string>> | undefined,
): string[] {
  return Object.entries(breakers ?? {})
    .filter(([, view]) => view === 'open')
    .map(([resource]) => resource);
}

/** Fails one batch of steps; true when the batch was full (more may be waiting). */
export async function failFastBatch(deps: BreakerFailFastDeps): Promise<boolean> {
  const resources = deps.openResources();
  if (resources.length === 0) return false;
  const steps = await findFailFastSteps(deps.db, resources, deps.batchSize);
  let failed = 0;
  for (const step of steps) {
    const done = await deps.db.transaction((tx) => failStepWhileBreakerOpen(tx, step));
    if (!done) continue;
    failed += 1;
    deps.log.info(
      {
        task_id: step.taskId,
        step: step.name,
        resource: step.resource,
        ...(step.retryAfterMs === undefined ? {} : { retry_after_ms: step.retryAfterMs }),
      },
      'circuit breaker open: step failed fast as retryable',
    );
  }
  if (failed > 0) deps.onOutcomesRecorded();
  // Full and making progress: go again at once (steps skipped as taken elsewhere do not count).
  return steps.length === deps.batchSize && failed > 0;
}
