import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Json } from '@sluice/core';
import { createMetrics } from '@sluice/telemetry';
import {
  needsHistory,
  observe,
  record,
  type EventFacts,
  type TaskObservation,
} from './task-metrics.js';

/** A task's history from `[type, from, to, atMs, data?]` rows; seq from 1. */
function history(
  ...rows: Array<[string, string | null, string | null, number, Record<string, Json>?]>
): EventFacts[] {
  return rows.map(([type, fromStatus, toStatus, at, data], index) => ({
    seq: index + 1,
    type,
    fromStatus,
    toStatus,
    data: data ?? null,
    createdAt: new Date(at),
  }));
}

const CREATE = ['create', null, 'queued', 0, { priority: 1, type: 'summarize' }] as const;

/** The observations of each event of `events` given the ones before it. */
function observeAll(events: readonly EventFacts[]): TaskObservation[][] {
  return events.map((event, index) => observe(events.slice(0, index), event));
}

describe('observe', () => {
  it('times the wait to the first start only, and the run from it to the end', () => {
    const events = history(
      [...CREATE],
      ['start', 'queued', 'running', 2_000],
      ['fail_retryable', 'running', 'failed_retryable', 3_000],
      ['backoff_due', 'failed_retryable', 'queued', 4_000],
      ['start', 'queued', 'running', 5_000],
      ['complete', 'running', 'succeeded', 9_000],
    );
    assert.deepEqual(observeAll(events), [
      [],
      [{ kind: 'wait', priority: 'P1', type: 'summarize', seconds: 2 }],
      [],
      [],
      [],
      [{ kind: 'run', priority: 'P1', type: 'summarize', seconds: 7 }],
    ]);
  });

  it('counts a cancel of a running task once, when it completes', () => {
    const events = history(
      [...CREATE],
      ['start', 'queued', 'running', 1_000],
      ['cancel', 'running', 'running', 2_000],
      ['cancel_completed', 'running', 'cancelled', 2_500],
    );
    const observed = observeAll(events);
    assert.deepEqual(observed[2], []);
    assert.deepEqual(observed[3], [
      { kind: 'run', priority: 'P1', type: 'summarize', seconds: 1.5 },
      { kind: 'cancelled' },
    ]);
  });

  it('counts a task cancelled while queued without a run time', () => {
    const events = history([...CREATE], ['cancel', 'queued', 'cancelled', 1_000]);
    assert.deepEqual(observeAll(events)[1], [{ kind: 'cancelled' }]);
  });

  it('times approval waits from the ask (or the resume that asks again) to the decision', () => {
    const events = history(
      [...CREATE],
      ['start', 'queued', 'running', 1_000],
      ['await_approval', 'running', 'waiting_approval', 2_000],
      ['approval_timeout', 'waiting_approval', 'paused', 12_000],
      ['resume', 'paused', 'waiting_approval', 20_000],
      ['approve', 'waiting_approval', 'running', 23_000],
      ['await_approval', 'running', 'waiting_approval', 24_000],
      ['reject', 'waiting_approval', 'cancelled', 30_000],
    );
    const observed = observeAll(events);
    assert.deepEqual(observed[3], [{ kind: 'approval_wait', decision: 'timed_out', seconds: 10 }]);
    assert.deepEqual(observed[5], [{ kind: 'approval_wait', decision: 'approved', seconds: 3 }]);
    assert.deepEqual(observed[7], [
      { kind: 'run', priority: 'P1', type: 'summarize', seconds: 29 },
      { kind: 'approval_wait', decision: 'rejected', seconds: 6 },
      { kind: 'cancelled' },
    ]);
  });

  it('starts a new wait and run with each retry by a person', () => {
    const events = history(
      [...CREATE],
      ['start', 'queued', 'running', 1_000],
      ['fail_terminal', 'running', 'failed_terminal', 2_000],
      ['retry', 'failed_terminal', 'queued', 10_000],
      ['start', 'queued', 'running', 10_500],
      ['complete', 'running', 'succeeded', 11_000],
    );
    const observed = observeAll(events);
    assert.deepEqual(observed[2], [{ kind: 'run', priority: 'P1', type: 'summarize', seconds: 1 }]);
    assert.deepEqual(observed[4], [
      { kind: 'wait', priority: 'P1', type: 'summarize', seconds: 0.5 },
    ]);
    assert.deepEqual(observed[5], [
      { kind: 'run', priority: 'P1', type: 'summarize', seconds: 0.5 },
    ]);
  });

  it('observes no wait or run without the create event, and nothing for facts', () => {
    const [start, done] = history(
      ['start', 'queued', 'running', 1_000],
      ['complete', 'running', 'succeeded', 2_000],
    );
    assert.ok(start && done);
    assert.deepEqual(observe([], start), []);
    assert.deepEqual(observe([start], done), []);
    const [progress] = history(['step_progress', null, null, 3_000]);
    assert.ok(progress);
    assert.equal(needsHistory(progress), false);
    assert.deepEqual(observe([], progress), []);
  });
});

describe('record', () => {
  it('records each kind on its catalogue metric', async () => {
    const metrics = createMetrics();
    record(metrics, { kind: 'wait', priority: 'P2', type: 'summarize', seconds: 0.3 });
    record(metrics, { kind: 'run', priority: 'P2', type: 'summarize', seconds: 4 });
    record(metrics, { kind: 'approval_wait', decision: 'approved', seconds: 20 });
    record(metrics, { kind: 'cancelled' });
    const text = await metrics.registry.metrics();
    assert.match(
      text,
      /^sluice_task_wait_time_seconds_count\{priority="P2",type="summarize"\} 1$/m,
    );
    assert.match(text, /^sluice_task_run_time_seconds_count\{priority="P2",type="summarize"\} 1$/m);
    assert.match(text, /^sluice_approval_wait_time_seconds_count\{decision="approved"\} 1$/m);
    assert.match(text, /^sluice_cancellations_total 1$/m);
  });
});
