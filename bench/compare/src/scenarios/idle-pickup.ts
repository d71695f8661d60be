/**
 * Idle pickup (issue 7: "create → handler start on an idle system"): the workers run and nothing
 * is queued; jobs are sent one at a time, a fixed gap apart — long enough that each normally finds
 * the system idle again — and timed from the send to the handler's start and to completion.
 * The same measurement as end-to-end (scenarios/end-to-end.ts), at a pace set by the gap instead
 * of the drain rate. Targets for Sluice: p50 ≤ 5 ms, p99 ≤ 20 ms.
 */
import type { Scenario, ScenarioContext, ScenarioResult } from '../scenario.js';
import type { QueueSystem } from '../system.js';
import { skipBatched } from './arrivals.js';
import { runArrivals } from './end-to-end.js';

/** Between two sends: well above a healthy pickup, so jobs rarely overlap. */
export const IDLE_GAP_MS = 100;

export const idlePickup: Scenario = {
  name: 'idle-pickup',
  description: `jobs sent one at a time ${IDLE_GAP_MS} ms apart to idle workers; latency to start and completion`,
  defaultCount: 200,
  smokeCount: 10,
  skip: skipBatched,

  run(system: QueueSystem, context: ScenarioContext): Promise<ScenarioResult> {
    return runArrivals({
      scenario: 'idle-pickup',
      system,
      context,
      count: context.count,
      intervalMs: IDLE_GAP_MS,
      notes: [],
    });
  },
};
