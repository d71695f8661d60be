/**
 * The dispatcher's wake-up for a step that became ready: a created task's first step, a task's
 * next step, an urgent claim handed back. Core NATS, so a loss only delays it until the scheduler's
 * poll. It names the step's resource and priority, so the dispatcher need not look when that
 * resource is full and the step is not P0 (the scheduler's full-resources.ts).
 */
import type { NatsConnection } from '@nats-io/transport-node';
import type { BusCatalog } from './catalog.js';
import { encodeMessage, type Wake } from './messages.js';

/** Publishes the dispatcher's wake-up for `step`; `reason` is for logs (e.g. `task.created`). */
export function wakeDispatcherFor(
  nc: Pick<NatsConnection, 'publish'>,
  catalog: BusCatalog,
  reason: string,
  step: NonNullable<Wake['step']>,
): void {
  nc.publish(catalog.subjects.wake('dispatch'), encodeMessage({ type: 'wake', reason, step }));
}
