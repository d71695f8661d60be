/**
 * Property tests of the transition table: fast-check walks random event sequences from `create`
 * and checks what must hold along every path, whatever the order of requests.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  NO_TASK,
  TASK_EVENT_TYPES,
  allowedSourceStatuses,
  decideTransition,
  historyProblem,
  isFinalStatus,
  type HistoryEntry,
  type TaskEvent,
  type TaskMachineState,
  type TaskStatus,
} from './task-state.js';

const anEvent: fc.Arbitrary<TaskEvent> = fc.oneof(
  fc
    .constantFrom(...TASK_EVENT_TYPES.filter((type) => type !== 'approval_timeout'))
    .map((type) => ({ type })),
  fc
    .constantFrom('pause' as const, 'cancel' as const)
    .map((onTimeout): TaskEvent => ({ type: 'approval_timeout', onTimeout })),
);

/** Replays events, keeping those the table allows; returns the states and the accepted history. */
function walk(events: readonly TaskEvent[]) {
  let state: TaskMachineState = NO_TASK;
  let attempt = 0;
  const history: HistoryEntry[] = [];
  const steps: Array<{ from: TaskMachineState; event: TaskEvent; to: TaskMachineState }> = [];
  for (const event of [{ type: 'create' } as TaskEvent, ...events]) {
    const decision = decideTransition(state, event);
    if (!decision.ok) continue;
    attempt += decision.attemptIncrement;
    steps.push({ from: state, event, to: decision.to });
    history.push({ event, toStatus: decision.to.status as TaskStatus });
    state = decision.to;
  }
  return { state, attempt, history, steps };
}

const RUNS = { numRuns: 2_000 };

describe('the transition table, along random paths', () => {
  it('records only histories that replay as paths in the table', () => {
    fc.assert(
      fc.property(fc.array(anEvent, { maxLength: 40 }), (events) => {
        assert.equal(historyProblem(walk(events).history), undefined);
      }),
      RUNS,
    );
  });

  it('never leaves succeeded, and leaves failed_terminal or cancelled only by retry', () => {
    fc.assert(
      fc.property(fc.array(anEvent, { maxLength: 40 }), (events) => {
        for (const { from, event } of walk(events).steps) {
          if (from.status === 'succeeded') assert.fail(`${event.type} left succeeded`);
          if (from.status !== null && isFinalStatus(from.status)) assert.equal(event.type, 'retry');
        }
      }),
      RUNS,
    );
  });

  it('counts an attempt per retry and starts at the first', () => {
    fc.assert(
      fc.property(fc.array(anEvent, { maxLength: 40 }), (events) => {
        const { attempt, steps } = walk(events);
        assert.equal(attempt, steps.filter((s) => s.event.type === 'retry').length);
      }),
      RUNS,
    );
  });

  it('keeps request flags where they mean something', () => {
    fc.assert(
      fc.property(fc.array(anEvent, { maxLength: 40 }), (events) => {
        for (const { to } of walk(events).steps) {
          if (to.cancelRequested || to.pauseRequested) assert.equal(to.status, 'running');
          if (to.approvalPending) assert.equal(to.status, 'paused');
          assert.ok(!(to.cancelRequested && to.pauseRequested), 'a cancel supersedes a pause');
        }
      }),
      RUNS,
    );
  });

  it('agrees with allowedSourceStatuses, which the conditional update uses', () => {
    fc.assert(
      fc.property(fc.array(anEvent, { maxLength: 30 }), anEvent, (events, probe) => {
        const { state } = walk(events);
        const allowed = decideTransition(state, probe).ok;
        if (allowed && state.status !== null) {
          assert.ok(allowedSourceStatuses(probe).includes(state.status));
        }
        if (state.status !== null && !allowedSourceStatuses(probe).includes(state.status)) {
          assert.equal(allowed, false);
        }
      }),
      RUNS,
    );
  });

  it('lets a second identical request lose: no event is applied twice in a row by two callers', () => {
    // Two people sending the same request at once: the second sees the first's result, and the
    // table refuses it for every request that changes the state (pause, cancel, approve, …).
    fc.assert(
      fc.property(fc.array(anEvent, { maxLength: 30 }), anEvent, (events, request) => {
        const { state } = walk(events);
        const first = decideTransition(state, request);
        if (!first.ok || request.type === 'continue') return;
        assert.equal(decideTransition(first.to, request).ok, false, `${request.type} twice`);
      }),
      RUNS,
    );
  });
});
