/**
 * The invariants every fault test checks over the database once its scenario is over (ARCHITECTURE
 * "Invariants"), read straight from the tables rather than through the API, so that what the
 * services recorded is judged, not what they choose to show:
 *
 * 1. every accepted task is final, or visibly progressing (a step queued or in flight, an outcome
 *    waiting to be applied, a timer pending, or a pause / approval waiting for a person);
 * 2. every task's history is a path in the transition table, with gap-free event sequences that
 *    end in the task's current state;
 * 3. at most one recorded success per task and step sequence;
 * 4. no step is started or dispatched again once its success is recorded;
 * 5. no task is both succeeded and dead-lettered (a redriven letter no longer counts).
 */
import assert from 'node:assert/strict';
import { eventFromRecord, historyProblem, isFinalStatus, isTaskStatus } from '@sluice/core';
import type { HistoryEntry, TaskStatus } from '@sluice/core';
import type { DatabaseHandle } from '@sluice/db';
import { describeHistory } from './history.js';

/** Which tasks to judge, and how strictly. */
export interface InvariantOptions {
  /** Only this tenant's tasks (default: every task in the database). */
  readonly tenantId?: string;
  /** Every task must be final, not merely progressing (a scenario that waited for the end). */
  readonly requireFinal?: boolean;
}

/** What the database held, for the test to print or assert more on. */
export interface InvariantSummary {
  readonly tasks: number;
  readonly byStatus: Readonly<Record<string, number>>;
  readonly deadLetters: number;
}

/** Facts that end a step sequence's work for good once its success is recorded. */
const AFTER_SUCCESS_FORBIDDEN = new Set([
  'step_started',
  'step_redispatched',
  'step_succeeded',
  'step_failed',
]);

/** The first problems found, at most this many, so a failure message stays readable. */
const MAX_REPORTED = 20;

/**
 * Checks the five invariants and throws one AssertionError listing every violation found (up to
 * {@link MAX_REPORTED}); resolves with a summary when all hold.
 */
export async function assertDatabaseInvariants(
  handle: DatabaseHandle,
  options: InvariantOptions = {},
): Promise<InvariantSummary> {
  const problems = await findInvariantProblems(handle, options);
  if (problems.length > 0) {
    const shown = problems.slice(0, MAX_REPORTED);
    const more =
      problems.length > shown.length ? `\n… and ${problems.length - shown.length} more` : '';
    assert.fail(`database invariants violated:\n${shown.join('\n')}${more}`);
  }
  return summarize(handle, options);
}

/** Every violation of the invariants, one line each naming the task. */
export async function findInvariantProblems(
  handle: DatabaseHandle,
  options: InvariantOptions = {},
): Promise<string[]> {
  const tasks = await readTasks(handle, options.tenantId);
  const events = await readEvents(handle, options.tenantId);
  const problems: string[] = [];
  for (const task of tasks) {
    const taskEvents = events.get(task.id) ?? [];
    problems.push(...stateProblems(task, options.requireFinal ?? false));
    problems.push(...historyProblems(task, taskEvents));
    problems.push(...stepSuccessProblems(task.id, taskEvents));
  }
  problems.push(...(await succeededAndDeadLettered(handle, options.tenantId)));
  return problems;
}

interface TaskRow {
  readonly id: string;
  readonly status: string;
  readonly last_event_seq: number;
  /** Steps queued or in flight, or with an outcome the scheduler has not applied yet. */
  readonly live_steps: number;
  readonly pending_timers: number;
}

interface EventRow {
  readonly task_id: string;
  readonly seq: number;
  readonly type: string;
  readonly to_status: string | null;
  readonly step_seq: number | null;
  readonly data: Record<string, unknown> | null;
}

async function readTasks(handle: DatabaseHandle, tenantId?: string): Promise<TaskRow[]> {
  return handle.sql<TaskRow[]>`
    select t.id, t.status, t.last_event_seq,
      (select count(*)::int from task_steps s
        where s.task_id = t.id
          and (s.status in ('ready', 'dispatched', 'running')
            or (s.outcome is not null and s.outcome_applied_at is null))) as live_steps,
      (select count(*)::int from task_timers m
        where m.task_id = t.id and m.done_at is null) as pending_timers
    from tasks t
    where ${tenantId === undefined ? handle.sql`true` : handle.sql`t.tenant_id = ${tenantId}`}
    order by t.created_at, t.id
  `;
}

/** Every task's events in sequence order, by task id. */
async function readEvents(
  handle: DatabaseHandle,
  tenantId?: string,
): Promise<Map<string, EventRow[]>> {
  const rows = await handle.sql<EventRow[]>`
    select task_id, seq, type, to_status, data,
      case when data ? 'seq' then (data->>'seq')::int end as step_seq
    from task_events
    where ${tenantId === undefined ? handle.sql`true` : handle.sql`tenant_id = ${tenantId}`}
    order by task_id, seq
  `;
  const byTask = new Map<string, EventRow[]>();
  for (const row of rows) {
    const list = byTask.get(row.task_id) ?? [];
    list.push(row);
    byTask.set(row.task_id, list);
  }
  return byTask;
}

/** Invariant 1: final, or something visibly moves it on (or a person is asked to). */
function stateProblems(task: TaskRow, requireFinal: boolean): string[] {
  if (!isTaskStatus(task.status)) return [`task ${task.id}: unknown status ${task.status}`];
  if (isFinalStatus(task.status)) return [];
  if (requireFinal) return [`task ${task.id}: ${task.status}, not final`];
  const waitsForAPerson = task.status === 'paused' || task.status === 'waiting_approval';
  if (waitsForAPerson || task.live_steps > 0 || task.pending_timers > 0) return [];
  return [`task ${task.id}: ${task.status} with no step queued or in flight and no timer pending`];
}

/** Invariant 2: events 1…n with no gap, transitions a path in the table ending in the status. */
function historyProblems(task: TaskRow, events: readonly EventRow[]): string[] {
  const problems: string[] = [];
  events.forEach((event, index) => {
    if (event.seq !== index + 1) {
      problems.push(`task ${task.id}: event ${index + 1} has seq ${event.seq}`);
    }
  });
  if (events.length !== task.last_event_seq) {
    problems.push(
      `task ${task.id}: ${events.length} events, but last_event_seq is ${task.last_event_seq}`,
    );
  }
  const history: HistoryEntry[] = [];
  for (const event of events) {
    if (event.to_status === null) continue;
    const coreEvent = eventFromRecord(event.type, event.data ?? {});
    if (!coreEvent || !isTaskStatus(event.to_status)) {
      problems.push(`task ${task.id}: event ${event.seq} ${event.type}→${event.to_status} unknown`);
      return problems;
    }
    history.push({ event: coreEvent, toStatus: event.to_status });
  }
  const problem = historyProblem(history);
  if (problem !== undefined) {
    problems.push(`task ${task.id}: ${problem}; history ${describeHistory(history)}`);
  }
  const last: TaskStatus | undefined = history.at(-1)?.toStatus;
  if (last !== task.status) {
    problems.push(`task ${task.id}: status ${task.status}, but its history ends in ${last}`);
  }
  return problems;
}

/** Invariants 3 and 4, per step sequence, from the step facts the executors and reconciler record. */
function stepSuccessProblems(taskId: string, events: readonly EventRow[]): string[] {
  const problems: string[] = [];
  const succeededAt = new Map<number, number>();
  for (const event of events) {
    if (event.step_seq === null) continue;
    const success = succeededAt.get(event.step_seq);
    if (success !== undefined && AFTER_SUCCESS_FORBIDDEN.has(event.type)) {
      problems.push(
        `task ${taskId}: step ${event.step_seq} has ${event.type} (event ${event.seq}) after its success (event ${success})`,
      );
    }
    if (event.type === 'step_succeeded' && success === undefined) {
      succeededAt.set(event.step_seq, event.seq);
    }
  }
  return problems;
}

/** Invariant 5. */
async function succeededAndDeadLettered(
  handle: DatabaseHandle,
  tenantId?: string,
): Promise<string[]> {
  const rows = await handle.sql<{ id: string; letters: number }[]>`
    select t.id, count(*)::int as letters
    from tasks t join dead_letters d on d.task_id = t.id
    where t.status = 'succeeded' and d.redriven_at is null
      and ${tenantId === undefined ? handle.sql`true` : handle.sql`t.tenant_id = ${tenantId}`}
    group by t.id
  `;
  return rows.map((r) => `task ${r.id}: succeeded, yet has ${r.letters} dead letter(s)`);
}

async function summarize(
  handle: DatabaseHandle,
  options: InvariantOptions,
): Promise<InvariantSummary> {
  const where =
    options.tenantId === undefined ? handle.sql`true` : handle.sql`tenant_id = ${options.tenantId}`;
  const statuses = await handle.sql<{ status: string; n: number }[]>`
    select status, count(*)::int as n from tasks where ${where} group by status
  `;
  const [letters] = await handle.sql<{ n: number }[]>`
    select count(*)::int as n from dead_letters where ${where}
  `;
  const byStatus = Object.fromEntries(statuses.map((s) => [s.status, s.n]));
  return {
    tasks: statuses.reduce((sum, s) => sum + s.n, 0),
    byStatus,
    deadLetters: letters?.n ?? 0,
  };
}
