/**
 * What the task lifecycle metrics need to know of each task's earlier events, kept in memory as
 * the relay marks events published (task-metrics.ts).
 *
 * Why: observing a start or an end needs the task's `create` (its labels) and its first start.
 * Reading them back per observed event cost two `task_events` queries per one-step task — 5 % of
 * all statements of a task (issue 7 profile). The relay sees every event of a task in sequence
 * order, so it can remember the few that matter instead. A task whose events it has not seen from
 * the start (the relay restarted, or the task was evicted) is read from Postgres once, as before.
 */
import { TaskStatus } from '@sluice/core';
import type { EventFacts } from './task-metrics.js';

/** The events of one task the metrics look back at, and the sequence of the last event seen. */
interface Remembered {
  lastSeq: number;
  facts: EventFacts[];
}

/** Tasks remembered by default: far more than run at once; the oldest seen are forgotten first. */
export const DEFAULT_REMEMBERED_TASKS = 10_000;

export class TaskHistory {
  private readonly tasks = new Map<string, Remembered>();

  constructor(private readonly capacity = DEFAULT_REMEMBERED_TASKS) {}

  /**
   * The remembered earlier events of `taskId` when the last one seen is the event right before
   * `seq` (nothing was missed), `[]` for a task's first event; otherwise undefined: read it.
   */
  before(taskId: string, seq: number): readonly EventFacts[] | undefined {
    const remembered = this.tasks.get(taskId);
    if (remembered?.lastSeq === seq - 1) return remembered.facts;
    return seq === 1 ? [] : undefined;
  }

  /** Remembers the events of a task read from Postgres (ascending), up to `lastSeq`. */
  load(taskId: string, events: readonly EventFacts[], lastSeq: number): void {
    this.tasks.delete(taskId);
    this.remember(taskId, { lastSeq, facts: events.filter(mattersLater).map(factsOf) });
  }

  /**
   * Notes `event` as seen, after {@link before} answered for it. An event out of sequence leaves
   * the task unknown (read again next time).
   */
  append(taskId: string, event: EventFacts): void {
    const known = this.before(taskId, event.seq);
    this.tasks.delete(taskId);
    if (known === undefined) return;
    const facts = mattersLater(event) ? [...known, factsOf(event)] : [...known];
    this.remember(taskId, { lastSeq: event.seq, facts });
  }

  get size(): number {
    return this.tasks.size;
  }

  private remember(taskId: string, remembered: Remembered): void {
    // Map order is insertion order: re-inserting on each event keeps the least recently active
    // task first, which is the one evicted.
    this.tasks.set(taskId, remembered);
    if (this.tasks.size > this.capacity) {
      const oldest = this.tasks.keys().next().value;
      if (oldest !== undefined) this.tasks.delete(oldest);
    }
  }
}

/**
 * The facts of `event` alone. The relay passes whole event rows (ids, tenant, step …), and a row
 * kept as it is holds all of them for as long as its task is remembered: with
 * {@link DEFAULT_REMEMBERED_TASKS} tasks remembered, each with its `create` and `start`, that was
 * ~3 MB more of the scheduler's live heap (issue 7, the footprint's live heaps: 34.2 MB after a
 * drain of 20,000 against 31.4).
 */
function factsOf(event: EventFacts): EventFacts {
  const { seq, type, fromStatus, toStatus, data, createdAt } = event;
  return { seq, type, fromStatus, toStatus, data, createdAt };
}

/** Whether a later observation can look back at `event` (see `observe` in task-metrics.ts). */
function mattersLater(event: EventFacts): boolean {
  return (
    event.type === 'create' ||
    event.type === 'retry' ||
    event.type === 'start' ||
    event.toStatus === TaskStatus.WaitingApproval
  );
}
