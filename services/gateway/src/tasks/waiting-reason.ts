/**
 * Why a task's next step waits for admission beyond its turn, from the governor's live decision and
 * the schedulers' urgent-wait guards — so `GetTask` says "the circuit breaker of tool:search is
 * open" or "P0 steps on llm wait longer than their target" instead of an unexplained wait.
 */
import { listsPriority, type GovernorDecision } from '@sluice/bus';
import type { Priority } from '@sluice/core';

/**
 * The reason in words, or `''` when nothing but the queue itself holds the step back.
 *
 * @param decision the governor's decision in force (undefined: no view of it)
 * @param guardCap the lowest cap of P1–P3 steps in flight a scheduler's urgent-wait guard puts on
 *   the resource now (undefined: none)
 */
export function waitingReason(
  decision: GovernorDecision | undefined,
  priority: Priority,
  resource: string,
  guardCap?: number,
): string {
  const breaker = decision?.breakers?.[resource];
  if (breaker === 'open') {
    return `the circuit breaker of ${resource} is open: the step waits until it lets calls through again`;
  }
  if (decision && listsPriority(decision.holds, priority)) {
    return `P${priority} is held by the governor under load (${causeOf(decision)}); the task stays queued`;
  }
  // The guard never holds P0 back: it is what the guard makes room for.
  if (guardCap !== undefined && priority > 0) {
    const urgent = `P0 steps on ${resource} wait longer than their target`;
    return guardCap === 0
      ? `${urgent}: lower priorities are held there until they catch up`
      : `${urgent}: lower priorities may have only ${guardCap} step${guardCap === 1 ? '' : 's'} in flight there until they catch up`;
  }
  if (!decision) return '';
  if (breaker === 'half_open') {
    return `the circuit breaker of ${resource} is half-open: only probe calls go through`;
  }
  if (listsPriority(decision.throttle, priority)) {
    return `P${priority} is throttled by the governor under load (${causeOf(decision)}): it may not use the slots kept free for more urgent work`;
  }
  return '';
}

/** What put the governor at its level: the first reason that is not a breaker's, else the level. */
function causeOf(decision: GovernorDecision): string {
  return decision.reasons.find((reason) => !reason.startsWith('breaker ')) ?? decision.level;
}
