/**
 * The dispatcher's wake-up for a step that became ready: a created task's first step, a task's
 * next step, an urgent claim handed back. Core NATS, so a loss only delays it until the scheduler's
 * poll. It names the step's resource and priority, so the dispatcher need not look when that
 * resource is full and the step is not P0 (the scheduler's full-resources.ts).
 */
import type { NatsConnection } from '@nats-io/transport-node';
import type { BusCatalog } from './catalog.js';
import { encodeMessage, type Wake } from './messages.js';

/** What a wake-up names: a ready step's resource and priority, or a step dispatched already. */
export type WakeStep = NonNullable<Wake['step']>;

/**
 * Publishes one wake-up per distinct resource, priority and `dispatched` of `steps` (a created
 * task's first steps, the steps an outcome added, urgent claims handed back): the dispatcher looks
 * at a resource once per wake-up, so a second one alike would only cost it a look that finds what
 * the first found. `reason` is for logs (e.g. `task.created`).
 */
export function wakeDispatcherForEach(
  nc: Pick<NatsConnection, 'publish'>,
  catalog: BusCatalog,
  reason: string,
  steps: Iterable<WakeStep>,
): void {
  const woken = new Set<string>();
  for (const step of steps) {
    const key = `${step.resource}\u0000${step.priority}\u0000${step.dispatched === true}`;
    if (woken.has(key)) continue;
    woken.add(key);
    // Only what a wake-up names: the steps given may carry more (a sequence, a name).
    const { resource, priority, dispatched } = step;
    const named: WakeStep = dispatched
      ? { resource, priority, dispatched }
      : { resource, priority };
    nc.publish(
      catalog.subjects.wake('dispatch'),
      encodeMessage({ type: 'wake', reason, step: named }),
    );
  }
}
