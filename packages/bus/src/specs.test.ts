import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { nanos } from '@nats-io/transport-node';
import { SluiceErrorCode, isSluiceError } from '@sluice/core';
import { createBusCatalog } from './catalog.js';
import {
  advisoriesStreamSpec,
  DEFAULT_ACK_WAIT_MS,
  DEFAULT_EVENTS_MAX_AGE_MS,
  DEFAULT_MAX_DELIVER,
  eventsStreamSpec,
  stepConsumerSpec,
  stepsStreamSpec,
  streamSpecs,
} from './specs.js';

const c = createBusCatalog('t_specs');

describe('stream specs', () => {
  it('makes the steps stream a bounded file work queue that refuses when full', () => {
    const s = stepsStreamSpec(c);
    assert.equal(s.name, 'T_SPECS_STEPS');
    assert.deepEqual(s.subjects, ['t_specs.step.>']);
    assert.equal(s.retention, 'workqueue');
    assert.equal(s.storage, 'file');
    assert.equal(s.discard, 'new');
    assert.ok((s.max_msgs ?? 0) > 0 && (s.max_bytes ?? 0) > 0);
    assert.equal(s.duplicate_window, nanos(120_000));
    assert.equal(s.num_replicas, 1);
    assert.equal(s.allow_direct, true, 'single messages are read by direct get');
  });

  it('applies options', () => {
    const s = stepsStreamSpec(c, {
      replicas: 3,
      steps: { maxMsgs: 10, maxBytes: 2048, duplicateWindowMs: 5_000 },
    });
    assert.equal(s.num_replicas, 3);
    assert.equal(s.max_msgs, 10);
    assert.equal(s.max_bytes, 2048);
    assert.equal(s.duplicate_window, nanos(5_000));
  });

  it('keeps events by age with a duplicate window no longer than the age', () => {
    const e = eventsStreamSpec(c);
    assert.equal(e.retention, 'limits');
    assert.deepEqual(e.subjects, ['t_specs.events.>']);
    assert.equal(e.max_age, nanos(DEFAULT_EVENTS_MAX_AGE_MS));
    assert.equal(e.duplicate_window, nanos(120_000));
    const short = eventsStreamSpec(c, { events: { maxAgeMs: 30_000 } });
    assert.equal(short.max_age, nanos(30_000));
    assert.equal(short.duplicate_window, nanos(30_000));
  });

  it('captures both dead-letter advisories of the steps stream', () => {
    const a = advisoriesStreamSpec(c, { advisories: { maxAgeMs: 60_000 } });
    assert.equal(a.name, 'T_SPECS_ADVISORIES');
    assert.deepEqual(a.subjects, [
      '$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.T_SPECS_STEPS.*',
      '$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.T_SPECS_STEPS.*',
    ]);
    assert.equal(a.retention, 'limits');
    assert.equal(a.max_age, nanos(60_000));
  });

  it('lists the three streams', () => {
    assert.deepEqual(
      streamSpecs(c).map((s) => s.name),
      ['T_SPECS_STEPS', 'T_SPECS_EVENTS', 'T_SPECS_ADVISORIES'],
    );
  });

  it('refuses nonsense limits', () => {
    const bad = [
      () => stepsStreamSpec(c, { replicas: 0 }),
      () => stepsStreamSpec(c, { steps: { maxMsgs: -1 } }),
      () => stepsStreamSpec(c, { steps: { maxBytes: 1.5 } }),
      () => stepsStreamSpec(c, { steps: { duplicateWindowMs: 50 } }),
      () => eventsStreamSpec(c, { events: { maxAgeMs: 0 } }),
      () => advisoriesStreamSpec(c, { advisories: { maxAgeMs: Number.NaN } }),
      () => stepConsumerSpec(c, 'llm', 0, { ackWaitMs: 0 }),
      () => stepConsumerSpec(c, 'llm', 0, { maxDeliver: -5 }),
    ];
    for (const fn of bad) {
      assert.throws(fn, (err: unknown) => isSluiceError(err, SluiceErrorCode.InvalidArgument));
    }
  });
});

describe('stepConsumerSpec', () => {
  it('is an explicit-ack, deliver-all durable filtered on exactly one priority subject', () => {
    const s = stepConsumerSpec(c, 'tool:http', 2);
    assert.equal(s.durable_name, 't_specs_step_tool__http_p2');
    assert.equal(s.filter_subject, 't_specs.step.tool:http.p2');
    assert.equal(s.ack_policy, 'explicit');
    assert.equal(s.deliver_policy, 'all');
    assert.equal(s.ack_wait, nanos(DEFAULT_ACK_WAIT_MS));
    assert.equal(s.max_deliver, DEFAULT_MAX_DELIVER);
    assert.equal('filter_subjects' in s, false, '2.9 has one filter subject per consumer');
  });

  it('applies options', () => {
    const s = stepConsumerSpec(c, 'llm', 0, { ackWaitMs: 2_000, maxDeliver: 2, maxAckPending: 7 });
    assert.equal(s.ack_wait, nanos(2_000));
    assert.equal(s.max_deliver, 2);
    assert.equal(s.max_ack_pending, 7);
  });
});
