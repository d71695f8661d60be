import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SluiceErrorCode, isSluiceError } from '@sluice/core';
import { decodeStepAdvisory } from './advisories.js';
import {
  BusMessageError,
  decodeMessage,
  decodeMessageOf,
  dispatchMsgId,
  encodeMessage,
  eventMsgId,
  isBusMessageError,
  MAX_MESSAGE_BYTES,
} from './messages.js';
import type { BusMessage } from './messages.js';

const TASK = '0b8f5a52-3c1e-4d7e-9a4b-1f2e3d4c5b6a';
const SUBJECT = 't.step.llm.p0';

const samples: BusMessage[] = [
  {
    type: 'step.dispatch',
    task_id: TASK,
    step_seq: 0,
    dispatch: 1,
    tenant_id: 'acme',
    priority: 3,
    resource: 'tool:http',
  },
  { type: 'step.result', task_id: TASK, step_seq: 4 },
  { type: 'step.result', task_id: TASK, step_seq: 1, applied: { resource: 'tool:http' } },
  { type: 'wake', reason: 'task.created' },
  { type: 'task.cancel', task_id: TASK },
  {
    type: 'task.event',
    task_id: TASK,
    tenant_id: 'acme',
    seq: 1,
    event: 'create',
    from_status: null,
    to_status: 'queued',
    step: null,
    at: '2025-01-02T03:04:05.678Z',
  },
  {
    type: 'task.event',
    task_id: TASK,
    tenant_id: 'acme',
    seq: 7,
    event: 'step_done',
    from_status: 'running',
    to_status: 'running',
    step: 'summarize',
    at: '2025-01-02T03:04:05+02:00',
  },
  { type: 'wake', reason: 'task.created', step: { resource: 'tool:http', priority: 2 } },
  {
    type: 'wake',
    reason: 'task.created',
    step: { resource: 'llm', priority: 0, dispatched: true },
  },
];

const bytes = (value: unknown): Uint8Array => new TextEncoder().encode(JSON.stringify(value));

function assertMalformed(data: Uint8Array, reason: RegExp): void {
  assert.throws(
    () => decodeMessage(SUBJECT, data),
    (err: unknown) => {
      assert.ok(err instanceof BusMessageError, String(err));
      assert.ok(isBusMessageError(err) && isSluiceError(err));
      assert.equal(err.code, 'invalid_argument');
      assert.equal(err.subject, SUBJECT);
      assert.match(err.reason, reason);
      assert.ok(err.message.includes(SUBJECT));
      return true;
    },
  );
}

describe('message codec', () => {
  it('round-trips every message type', () => {
    for (const message of samples) {
      assert.deepEqual(decodeMessage(SUBJECT, encodeMessage(message)), message);
    }
  });

  it('decodes a message of an expected type, and refuses another type', () => {
    const dispatch = decodeMessageOf('step.dispatch', SUBJECT, encodeMessage(samples[0]!));
    assert.equal(dispatch.resource, 'tool:http');
    assert.throws(
      () => decodeMessageOf('step.dispatch', SUBJECT, encodeMessage(samples[1]!)),
      (err: unknown) => isBusMessageError(err) && /expected a step.dispatch/.test(err.reason),
    );
  });

  it('drops unknown fields and reads a missing nullable field as null', () => {
    const decoded = decodeMessage(
      SUBJECT,
      bytes({ type: 'step.result', task_id: TASK, step_seq: 1, payload: 'x'.repeat(10) }),
    );
    assert.deepEqual(decoded, { type: 'step.result', task_id: TASK, step_seq: 1 });
    const { step: _omitted, ...withoutStep } = samples[5] as Extract<
      BusMessage,
      { type: 'task.event' }
    >;
    assert.equal((decodeMessage(SUBJECT, bytes(withoutStep)) as { step: unknown }).step, null);
  });

  it('refuses bytes that are not a JSON object', () => {
    assertMalformed(new Uint8Array([0xff, 0xfe, 0x00]), /not UTF-8 JSON/);
    assertMalformed(new TextEncoder().encode('{"type":'), /not UTF-8 JSON/);
    assertMalformed(new Uint8Array(0), /not UTF-8 JSON/);
    assertMalformed(bytes([1, 2]), /not a JSON object/);
    assertMalformed(bytes(null), /not a JSON object/);
    assertMalformed(bytes('wake'), /not a JSON object/);
    assertMalformed(new Uint8Array(MAX_MESSAGE_BYTES + 1), /larger than/);
  });

  it('refuses unknown types and invalid fields', () => {
    const d = samples[0] as Extract<BusMessage, { type: 'step.dispatch' }>;
    const e = samples[5] as Extract<BusMessage, { type: 'task.event' }>;
    const cases: [unknown, RegExp][] = [
      [{ type: 'step.unknown' }, /unknown message type/],
      [{ task_id: TASK }, /unknown message type/],
      [{ ...d, task_id: 'a.b' }, /task_id/],
      [{ ...d, task_id: undefined }, /task_id/],
      [{ ...d, step_seq: -1 }, /step_seq/],
      [{ ...d, step_seq: '1' }, /step_seq/],
      [{ ...d, step_seq: 1.5 }, /step_seq/],
      [{ ...d, dispatch: 0 }, /dispatch/],
      [{ ...d, tenant_id: 'ACME' }, /tenant_id/],
      [{ ...d, priority: 4 }, /priority/],
      [{ ...d, priority: '0' }, /priority/],
      [{ ...d, resource: 'tool.http' }, /resource/],
      [{ type: 'wake', reason: '' }, /reason/],
      [{ type: 'wake', reason: 'x'.repeat(257) }, /reason/],
      [{ type: 'wake', reason: 'r', step: null }, /step/],
      [{ type: 'wake', reason: 'r', step: { resource: 'tool:http' } }, /priority/],
      [{ type: 'wake', reason: 'r', step: { priority: 1, resource: 'tool.http' } }, /resource/],
      [
        { type: 'wake', reason: 'r', step: { priority: 0, resource: 'llm', dispatched: 1 } },
        /dispatched/,
      ],
      [{ type: 'step.result', task_id: TASK, step_seq: 1, applied: true }, /applied/],
      [
        { type: 'step.result', task_id: TASK, step_seq: 1, applied: { resource: 'a.b' } },
        /resource/,
      ],
      [{ type: 'task.cancel', task_id: '>' }, /task_id/],
      [{ ...e, seq: 0 }, /seq/],
      [{ ...e, event: 7 }, /event/],
      [{ ...e, from_status: 5 }, /from_status/],
      [{ ...e, to_status: '' }, /to_status/],
      [{ ...e, at: 'yesterday' }, /at/],
      [{ ...e, at: '2025-13-45T99:00:00Z' }, /at/],
    ];
    for (const [value, reason] of cases) assertMalformed(bytes(value), reason);
  });

  it('refuses to encode an invalid message', () => {
    assert.throws(
      () =>
        encodeMessage({
          ...(samples[0] as Extract<BusMessage, { type: 'step.dispatch' }>),
          dispatch: 0,
        }),
      (err: unknown) => isBusMessageError(err) && err.subject === undefined,
    );
  });
});

describe('message ids', () => {
  it('identify a dispatch and an event unambiguously', () => {
    assert.equal(dispatchMsgId(TASK, 2, 1), `${TASK}:2:1`);
    assert.notEqual(dispatchMsgId(TASK, 2, 1), dispatchMsgId(TASK, 2, 2));
    assert.equal(eventMsgId(TASK, 9), `${TASK}:e9`);
  });

  it('refuse malformed parts', () => {
    const bad = [
      () => dispatchMsgId('a:b', 1, 1),
      () => dispatchMsgId(TASK, -1, 1),
      () => dispatchMsgId(TASK, 1, 0),
      () => eventMsgId(TASK, 0),
      () => eventMsgId('', 1),
    ];
    for (const fn of bad) {
      assert.throws(fn, (err: unknown) => isSluiceError(err, SluiceErrorCode.InvalidArgument));
    }
  });
});

describe('decodeStepAdvisory', () => {
  const subject = '$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.T_STEPS.t_step_llm_p0';

  it('reads max-deliveries and terminated advisories', () => {
    const base = { id: 'x', timestamp: '2025-01-01T00:00:00Z', stream: 'T_STEPS', consumer: 'c' };
    assert.deepEqual(
      decodeStepAdvisory(
        subject,
        bytes({
          ...base,
          type: 'io.nats.jetstream.advisory.v1.max_deliver',
          stream_seq: 5,
          deliveries: 3,
        }),
      ),
      { kind: 'max_deliveries', stream: 'T_STEPS', consumer: 'c', stream_seq: 5, deliveries: 3 },
    );
    assert.equal(
      decodeStepAdvisory(
        subject,
        bytes({
          ...base,
          type: 'io.nats.jetstream.advisory.v1.terminated',
          consumer_seq: 9,
          stream_seq: 6,
          deliveries: 1,
        }),
      ).kind,
      'terminated',
    );
  });

  it('refuses other advisories and malformed ones', () => {
    for (const value of [
      {
        type: 'io.nats.jetstream.advisory.v1.nak',
        stream: 's',
        consumer: 'c',
        stream_seq: 1,
        deliveries: 1,
      },
      {
        type: 'io.nats.jetstream.advisory.v1.max_deliver',
        stream: 's',
        consumer: 'c',
        deliveries: 1,
      },
      {
        type: 'io.nats.jetstream.advisory.v1.max_deliver',
        consumer: 'c',
        stream_seq: 1,
        deliveries: 1,
      },
    ]) {
      assert.throws(() => decodeStepAdvisory(subject, bytes(value)), BusMessageError);
    }
    assert.throws(() => decodeStepAdvisory(subject, new Uint8Array([1])), BusMessageError);
  });
});
