/**
 * A task's history as the API shows it (`TaskEvent`s of `WatchTask`), read as the transition
 * table (`@sluice/core`) sees it, to check that what the services recorded is a path in the table.
 */
import assert from 'node:assert/strict';
import type { TaskEvent } from '@sluice/api';
import { eventFromRecord, historyProblem, isTaskStatus, type HistoryEntry } from '@sluice/core';

/**
 * The table's event and the state it led to, of one API event that is a transition.
 *
 * @throws AssertionError when the event's type or status is unknown to the table.
 */
export function historyEntry(event: TaskEvent): HistoryEntry {
  const toStatus = event.to_status.slice('TASK_STATUS_'.length).toLowerCase();
  assert.ok(isTaskStatus(toStatus), `unknown status ${event.to_status}`);
  const data = event.data ? (JSON.parse(event.data) as Record<string, unknown>) : {};
  const coreEvent = eventFromRecord(event.type, data);
  assert.ok(coreEvent, `unknown event type ${event.type}`);
  return { event: coreEvent, toStatus };
}

/**
 * The transitions among `events`, in order; recorded facts that change no state (`step_started`
 * …, shown with an unspecified status) are left out.
 */
export function historyEntries(events: readonly TaskEvent[]): HistoryEntry[] {
  return events.filter((e) => e.to_status !== 'TASK_STATUS_UNSPECIFIED').map(historyEntry);
}

/** A history in one line, as failure messages show it: `create→queued, start→running, …`. */
export function describeHistory(history: readonly HistoryEntry[]): string {
  return history.map((h) => `${h.event.type}→${h.toStatus}`).join(', ');
}

/**
 * Asserts that `history` is a path in the transition table, starting with `create`; the message
 * names `what`, the first step off the table and the whole history.
 */
export function assertHistoryInTable(history: readonly HistoryEntry[], what: string): void {
  const problem = historyProblem(history);
  assert.equal(
    problem,
    undefined,
    `${what} is not a path in the table: ${problem}; history ${describeHistory(history)}`,
  );
}
