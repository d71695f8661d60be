/**
 * Why a task's next step waits for admission beyond its turn, from the governor's live decision —
 * so `GetTask` says "the circuit breaker of tool:search is open" instead of an unexplained wait.
 */
import { listsPriority, type GovernorDecision } from '@sluice/bus';
import type { Priority } from '@sluice/core';

/** The reason in words, or `''` when nothing but the queue itself holds the step back. */
export function waitingReason(
  decision: GovernorDecision,
  priority: Priority,
  resource: string,
): string {
  const breaker = decision.breakers?.[resource];
  const cause = decision.reasons.find((reason) => !reason.startsWith('breaker ')) ?? decision.level;
  if (breaker === 'open') {
    return `the circuit breaker of ${resource} is open: the step waits until it lets calls through again`;
  }
  if (listsPriority(decision.holds, priority)) {
    return `P${priority} is held by the governor under load (${cause}); the task stays queued`;
  }
  if (breaker === 'half_open') {
    return `the circuit breaker of ${resource} is half-open: only probe calls go through`;
  }
  if (listsPriority(decision.throttle, priority)) {
    return `P${priority} is throttled by the governor under load (${cause}): it may not use the slots kept free for more urgent work`;
  }
  return '';
}
