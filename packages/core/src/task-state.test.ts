import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  NO_TASK,
  TASK_EVENT_TYPES,
  TASK_STATUSES,
  allowedSourceStatuses,
  decideTransition,
  historyProblem,
  type TaskEvent,
  type TaskMachineState,
  type TaskStatus,
} from './task-state.js';

/**
 * The table of ARCHITECTURE.md written out independently of the implementation: every allowed
 * (state, flags, event) → (state, flags). Anything not listed must be refused.
 */
interface Row {
  from: TaskStatus;
  when?: Partial<Omit<TaskMachineState, 'status'>>;
  event: TaskEvent;
  to: TaskStatus;
  toFlags?: Partial<Omit<TaskMachineState, 'status'>>;
  attempt?: 1;
}
const ROWS: Row[] = [
  { from: 'queued', event: { type: 'start' }, to: 'running' },
  { from: 'queued', event: { type: 'cancel' }, to: 'cancelled' },
  { from: 'queued', event: { type: 'pause' }, to: 'paused' },
  { from: 'running', event: { type: 'continue' }, to: 'running', toFlags: 'same' as never },
  { from: 'running', event: { type: 'complete' }, to: 'succeeded' },
  { from: 'running', event: { type: 'await_approval' }, to: 'waiting_approval' },
  { from: 'running', event: { type: 'fail_retryable' }, to: 'failed_retryable' },
  { from: 'running', event: { type: 'fail_terminal' }, to: 'failed_terminal' },
  {
    from: 'running',
    when: { cancelRequested: false },
    event: { type: 'cancel' },
    to: 'running',
    toFlags: { cancelRequested: true },
  },
  {
    from: 'running',
    when: { cancelRequested: true },
    event: { type: 'cancel_completed' },
    to: 'cancelled',
  },
  {
    from: 'running',
    when: { pauseRequested: false, cancelRequested: false },
    event: { type: 'pause' },
    to: 'running',
    toFlags: { pauseRequested: true },
  },
  {
    from: 'running',
    when: { pauseRequested: true, cancelRequested: false },
    event: { type: 'pause_completed' },
    to: 'paused',
  },
  {
    // The step that ended asked for an approval: the task is paused with it pending.
    from: 'running',
    when: { pauseRequested: true, cancelRequested: false },
    event: { type: 'pause_completed', approvalPending: true },
    to: 'paused',
    toFlags: { approvalPending: true },
  },

  { from: 'waiting_approval', event: { type: 'approve' }, to: 'running' },
  { from: 'waiting_approval', event: { type: 'reject' }, to: 'cancelled' },
  {
    from: 'waiting_approval',
    event: { type: 'approval_timeout', onTimeout: 'pause' },
    to: 'paused',
    toFlags: { approvalPending: true },
  },
  {
    from: 'waiting_approval',
    event: { type: 'approval_timeout', onTimeout: 'cancel' },
    to: 'cancelled',
  },
  { from: 'waiting_approval', event: { type: 'cancel' }, to: 'cancelled' },
  { from: 'failed_retryable', event: { type: 'backoff_due' }, to: 'queued' },
  { from: 'failed_retryable', event: { type: 'cancel' }, to: 'cancelled' },
  { from: 'paused', when: { approvalPending: false }, event: { type: 'resume' }, to: 'queued' },
  {
    // A step failed while the pause was requested and its backoff has not ended.
    from: 'paused',
    when: { approvalPending: false },
    event: { type: 'resume', retryWaiting: true },
    to: 'failed_retryable',
  },
  {
    from: 'paused',
    when: { approvalPending: true },
    event: { type: 'resume', retryWaiting: true },
    to: 'waiting_approval',
  },
  {
    from: 'paused',
    when: { approvalPending: true },
    event: { type: 'resume' },
    to: 'waiting_approval',
  },
  { from: 'paused', event: { type: 'cancel' }, to: 'cancelled' },
  { from: 'failed_terminal', event: { type: 'retry' }, to: 'queued', attempt: 1 },
  { from: 'cancelled', event: { type: 'retry' }, to: 'queued', attempt: 1 },
];

const ALL_EVENTS: TaskEvent[] = TASK_EVENT_TYPES.flatMap((type): TaskEvent[] => {
  if (type === 'approval_timeout') {
    return [
      { type, onTimeout: 'pause' },
      { type, onTimeout: 'cancel' },
    ];
  }
  if (type === 'pause_completed') return [{ type }, { type, approvalPending: true }];
  if (type === 'resume') return [{ type }, { type, retryWaiting: true }];
  return [{ type }];
});

function allStates(): TaskMachineState[] {
  const states: TaskMachineState[] = [];
  for (const status of TASK_STATUSES)
    for (const cancelRequested of [false, true])
      for (const pauseRequested of [false, true])
        for (const approvalPending of [false, true])
          states.push({ status, cancelRequested, pauseRequested, approvalPending });
  return states;
}

function sameEvent(a: TaskEvent, b: TaskEvent): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

function matchingRow(state: TaskMachineState, event: TaskEvent): Row | undefined {
  return ROWS.find(
    (row) =>
      row.from === state.status &&
      sameEvent(row.event, event) &&
      Object.entries(row.when ?? {}).every(
        ([flag, value]) => state[flag as keyof TaskMachineState] === value,
      ),
  );
}

describe('decideTransition', () => {
  it('answers every (state, flags, event) combination exactly as the table says', () => {
    let checked = 0;
    for (const state of allStates()) {
      for (const event of ALL_EVENTS) {
        checked++;
        const decision = decideTransition(state, event);
        const row = matchingRow(state, event);
        const label = `${JSON.stringify(state)} + ${JSON.stringify(event)}`;
        if (!row) {
          assert.equal(decision.ok, false, `${label} must be refused`);
          if (!decision.ok) assert.match(decision.reason, /\S/);
          continue;
        }
        if (!decision.ok) return assert.fail(`${label} must be allowed: ${decision.reason}`);
        assert.equal(decision.to.status, row.to, label);
        assert.equal(decision.attemptIncrement, row.attempt ?? 0, label);
        const expectedFlags =
          (row.toFlags as unknown) === 'same'
            ? {
                cancelRequested: state.cancelRequested,
                pauseRequested: state.pauseRequested,
                approvalPending: false,
              }
            : {
                cancelRequested: false,
                pauseRequested: false,
                approvalPending: false,
                ...row.toFlags,
              };
        assert.deepEqual(
          {
            cancelRequested: decision.to.cancelRequested,
            pauseRequested: decision.to.pauseRequested,
            approvalPending: decision.to.approvalPending,
          },
          expectedFlags,
          label,
        );
      }
    }
    assert.equal(checked, 8 * 8 * ALL_EVENTS.length);
  });

  it('creates only tasks that do not exist', () => {
    assert.deepEqual(decideTransition(NO_TASK, { type: 'create' }), {
      ok: true,
      to: NO_TASK.status === null ? { ...NO_TASK, status: 'queued' } : NO_TASK,
      attemptIncrement: 0,
    });
    for (const event of ALL_EVENTS.filter((e) => e.type !== 'create')) {
      assert.equal(decideTransition(NO_TASK, event).ok, false, event.type);
    }
    for (const state of allStates()) {
      assert.equal(decideTransition(state, { type: 'create' }).ok, false);
    }
  });

  it('says why a transition is refused', () => {
    const decision = decideTransition(
      {
        status: 'succeeded',
        cancelRequested: false,
        pauseRequested: false,
        approvalPending: false,
      },
      { type: 'cancel' },
    );
    assert.deepEqual(decision, { ok: false, reason: 'cannot cancel a task that is succeeded' });
  });
});

describe('allowedSourceStatuses', () => {
  it('lists the source states of each event from the table', () => {
    assert.deepEqual(allowedSourceStatuses({ type: 'cancel' }).sort(), [
      'failed_retryable',
      'paused',
      'queued',
      'running',
      'waiting_approval',
    ]);
    assert.deepEqual(allowedSourceStatuses({ type: 'retry' }).sort(), [
      'cancelled',
      'failed_terminal',
    ]);
    assert.deepEqual(allowedSourceStatuses({ type: 'start' }), ['queued']);
  });
});

describe('historyProblem', () => {
  it('accepts a path in the table', () => {
    assert.equal(
      historyProblem([
        { event: { type: 'create' }, toStatus: 'queued' },
        { event: { type: 'start' }, toStatus: 'running' },
        { event: { type: 'continue' }, toStatus: 'running' },
        { event: { type: 'cancel' }, toStatus: 'running' },
        { event: { type: 'cancel_completed' }, toStatus: 'cancelled' },
        { event: { type: 'retry' }, toStatus: 'queued' },
      ]),
      undefined,
    );
  });

  it('names the first event that leaves the table', () => {
    assert.match(
      historyProblem([
        { event: { type: 'create' }, toStatus: 'queued' },
        { event: { type: 'complete' }, toStatus: 'succeeded' },
      ]) ?? '',
      /event 2 \(complete\)/,
    );
    assert.match(
      historyProblem([{ event: { type: 'start' }, toStatus: 'running' }]) ?? '',
      /event 1/,
    );
    assert.match(
      historyProblem([{ event: { type: 'create' }, toStatus: 'running' }]) ?? '',
      /recorded running, table says queued/,
    );
  });
});
