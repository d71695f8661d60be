/**
 * What the gateway does with requests it must refuse, against the machine's real NATS and Postgres:
 * every malformed `CreateTask` answers `INVALID_ARGUMENT` naming the field (in the message and in a
 * `google.rpc.BadRequest` detail), writes no row and publishes nothing; reads of unknown or
 * malformed ids, a reused idempotency key, bad `ListTasks` arguments, pagination, and the methods
 * declared for the next issue.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { status } from '@grpc/grpc-js';
import { fromTimestamp, type Task } from '@sluice/api';
import { applyTransition } from '@sluice/db';
import type { CreateTaskParams, TaskClient } from '@sluice/sdk/client';
import { DEFAULT_MAX_INPUT_BYTES } from '../../services/gateway/src/config.js';
import {
  bearer,
  expectInvalidField,
  expectStatus,
  startGatewayFixture,
  type GatewayFixture,
  type RawTaskClient,
} from '../support/gateway-fixture.js';

const TYPE = 'research-brief';
const VALID_INPUT = { topic: 'backpressure', sourceUrl: 'https://example.com/articles/1' };

let fx: GatewayFixture;
let apiKey: string;
let client: TaskClient;
let raw: RawTaskClient;

before(async () => {
  fx = await startGatewayFixture('bad_input');
  apiKey = await fx.tenantWithKey('acme');
  client = fx.client(apiKey);
  raw = fx.raw();
});

after(async () => {
  await fx?.stop();
});

/** A valid request with some fields replaced. */
function request(overrides: Partial<CreateTaskParams>): CreateTaskParams {
  return { type: TYPE, priority: 'PRIORITY_P1', input: VALID_INPUT, ...overrides };
}

/** JSON text of exactly `bytes` bytes that is a valid input of the sample type. */
function validInputOfSize(bytes: number): string {
  const base = JSON.stringify({ ...VALID_INPUT, padding: '' });
  const text = JSON.stringify({ ...VALID_INPUT, padding: 'x'.repeat(bytes - base.length) });
  assert.equal(Buffer.byteLength(text), bytes);
  return text;
}

describe('CreateTask refuses bad input: INVALID_ARGUMENT naming the field, nothing written or published', () => {
  const typedCases: [string, string, Partial<CreateTaskParams>][] = [
    ['an unknown task type', 'type', { type: 'no-such-type' }],
    ['a missing type', 'type', { type: '' }],
    ['a type that is not a valid name', 'type', { type: 'Research Brief!' }],
    ['an unspecified priority', 'priority', { priority: 'PRIORITY_UNSPECIFIED' }],
    ['an idempotency key too long', 'idempotency_key', { idempotencyKey: 'k'.repeat(257) }],
    ['an idempotency key with a control character', 'idempotency_key', { idempotencyKey: 'a\nb' }],
    ['a missing input', 'input', { input: '' }],
    ['input that is not valid JSON', 'input', { input: '{"topic": "queues", ' }],
    ['input that is not an object', 'input', { input: ['queues'] }],
    ['input without topic', 'input.topic', { input: { sourceUrl: VALID_INPUT.sourceUrl } }],
    ['input whose topic is not a string', 'input.topic', { input: { ...VALID_INPUT, topic: 42 } }],
    ['input whose topic is empty', 'input.topic', { input: { ...VALID_INPUT, topic: '' } }],
    [
      'input whose topic is too long',
      'input.topic',
      { input: { ...VALID_INPUT, topic: 't'.repeat(501) } },
    ],
    [
      'input whose sourceUrl is not a URL',
      'input.sourceUrl',
      { input: { ...VALID_INPUT, sourceUrl: 'not a url' } },
    ],
    [
      'input nested too deeply',
      'input',
      { input: { ...VALID_INPUT, deep: JSON.parse('['.repeat(40) + ']'.repeat(40)) as unknown } },
    ],
    ['input larger than 1 MiB', 'input', { input: validInputOfSize(DEFAULT_MAX_INPUT_BYTES + 1) }],
    // Valid JSON, but Postgres's jsonb cannot store U+0000, in a value or in a key.
    ['input holding U+0000 in a string', 'input', { input: { ...VALID_INPUT, note: 'a\u0000b' } }],
    ['input holding U+0000 in a key', 'input', { input: { ...VALID_INPUT, ['k\u0000']: 1 } }],
    // Valid JSON too (the SDK sends the escape `\ud800`), but not Unicode: jsonb refuses it.
    [
      'input holding an unpaired surrogate in a string',
      'input',
      { input: { ...VALID_INPUT, note: 'a\ud800b' } },
    ],
    [
      'input holding an unpaired surrogate in a key',
      'input',
      { input: { ...VALID_INPUT, ['k\udc00']: 1 } },
    ],
  ];
  for (const [what, field, overrides] of typedCases) {
    it(`${what} → ${field}`, async () => {
      await fx.expectNoEffect(async () => {
        await expectInvalidField(client.createTask(request(overrides)), field);
      });
    });
  }

  // What the typed client cannot express: numbers outside the enum, fields left out entirely.
  const rawCases: [string, string, object][] = [
    [
      'a priority outside P0–P3 (enum number 9)',
      'priority',
      { type: TYPE, priority: 9, input: JSON.stringify(VALID_INPUT) },
    ],
    [
      'a priority outside P0–P3 (enum number 5)',
      'priority',
      { type: TYPE, priority: 5, input: JSON.stringify(VALID_INPUT) },
    ],
    ['no field at all', 'type', {}],
    ['no priority', 'priority', { type: TYPE, input: JSON.stringify(VALID_INPUT) }],
    ['no input', 'input', { type: TYPE, priority: 'PRIORITY_P0' }],
  ];
  for (const [what, field, body] of rawCases) {
    it(`${what} → ${field}`, async () => {
      await fx.expectNoEffect(async () => {
        await expectInvalidField(raw.unary('CreateTask', body, bearer(apiKey)), field);
      });
    });
  }

  it('names the reason in the message of an oversized input', async () => {
    const message = await expectInvalidField(
      client.createTask(request({ input: validInputOfSize(DEFAULT_MAX_INPUT_BYTES + 1) })),
      'input',
    );
    assert.match(message, new RegExp(`at most ${DEFAULT_MAX_INPUT_BYTES}`));
  });

  it('refuses a number too large for a double (it was stored as null), naming the input', async () => {
    const input = JSON.stringify(VALID_INPUT).replace(/}$/, ',"budget":1e400}');
    await fx.expectNoEffect(async () => {
      const message = await expectInvalidField(client.createTask(request({ input })), 'input');
      assert.match(message, /number too large/);
    });
  });

  it('accepts an input of exactly 1 MiB (the limit is inclusive)', async () => {
    const before = await fx.rowCounts();
    const { task, created } = await client.createTask(
      request({ input: validInputOfSize(DEFAULT_MAX_INPUT_BYTES) }),
    );
    assert.equal(created, true);
    assert.equal(task.status, 'TASK_STATUS_QUEUED');
    assert.deepEqual(await fx.rowCounts(), {
      tasks: before.tasks + 1,
      task_steps: before.task_steps + 1,
      task_events: before.task_events + 1,
    });
  });
});

describe('an idempotency key', () => {
  it('of 256 characters is accepted (one more is refused above)', async () => {
    const key = 'k'.repeat(256);
    const { task, created } = await client.createTask(request({ idempotencyKey: key }));
    assert.equal(created, true);
    assert.equal(task.idempotency_key, key);
  });

  it('repeated with the same input returns the first task and writes nothing', async () => {
    const first = await client.createTask(request({ idempotencyKey: 'same-input' }));
    assert.equal(first.created, true);
    await fx.expectNoEffect(async () => {
      // Key order does not make another input.
      const input = { sourceUrl: VALID_INPUT.sourceUrl, topic: VALID_INPUT.topic };
      const repeat = await client.createTask(request({ idempotencyKey: 'same-input', input }));
      assert.equal(repeat.created, false);
      assert.equal(repeat.task.task_id, first.task.task_id);
    });
  });

  for (const [what, overrides] of [
    ['a different input', { input: { ...VALID_INPUT, topic: 'something else' } }],
    ['a different priority', { priority: 'PRIORITY_P0' }],
  ] as const) {
    it(`repeated with ${what} answers ALREADY_EXISTS and writes nothing`, async () => {
      const key = `conflict-${what}`;
      const first = await client.createTask(request({ idempotencyKey: key }));
      assert.equal(first.created, true);
      await fx.expectNoEffect(async () => {
        const error = await expectStatus(
          client.createTask(request({ ...overrides, idempotencyKey: key })),
          status.ALREADY_EXISTS,
        );
        assert.match(error.details, /idempotency key/);
      });
      assert.equal((await client.getTask(first.task.task_id)).task.input, first.task.input);
    });
  }
});

describe('reading, watching and cancelling a task by id', () => {
  it('answers NOT_FOUND for an unknown id', async () => {
    const id = randomUUID();
    await fx.expectNoEffect(async () => {
      await expectStatus(client.getTask(id), status.NOT_FOUND);
      await expectStatus(raw.watch({ task_id: id }, bearer(apiKey)), status.NOT_FOUND);
      await expectStatus(client.cancelTask(id), status.NOT_FOUND);
    });
  });

  // The API documents INVALID_ARGUMENT for a task_id that is empty or not a task id at all.
  for (const [what, id] of [
    ['a malformed id', 'not-a-uuid'],
    ['an id with a subject wildcard', '>'],
    ['an empty id', ''],
  ] as const) {
    it(`answers INVALID_ARGUMENT naming task_id for ${what}`, async () => {
      await fx.expectNoEffect(async () => {
        await expectInvalidField(client.getTask(id), 'task_id');
        await expectInvalidField(raw.watch({ task_id: id }, bearer(apiKey)), 'task_id');
        await expectInvalidField(client.cancelTask(id), 'task_id');
      });
    });
  }

  it('answers INVALID_ARGUMENT naming after_seq for a watch from a negative sequence', async () => {
    const { task } = await client.createTask(request({}));
    await expectInvalidField(
      raw.watch({ task_id: task.task_id, after_seq: '-1' }, bearer(apiKey)),
      'after_seq',
    );
  });

  it('answers INVALID_ARGUMENT naming after_seq for a watch past the largest sequence', async () => {
    // task_events.seq is an integer: a larger value failed the read of the events (INTERNAL).
    const { task } = await client.createTask(request({}));
    await expectInvalidField(
      raw.watch({ task_id: task.task_id, after_seq: '2147483648' }, bearer(apiKey)),
      'after_seq',
    );
  });
});

/**
 * A page token of ListTasks as the gateway makes them for a listing without filters
 * (services/gateway/src/tasks/page-token.ts), with the position given: only that part is forged.
 */
function forgedPageToken(position: { c: string; i: string }): string {
  const token = { k: 'tasks.v1', ...position, t: '[null,null,null,null,null]' };
  return Buffer.from(JSON.stringify(token)).toString('base64url');
}

describe('ListTasks', () => {
  for (const [what, field, body] of [
    ['a page_token it did not issue', 'page_token', { page_token: 'garbage!' }],
    [
      'a well-formed page_token with a bad id',
      'page_token',
      {
        page_token: forgedPageToken({ c: new Date().toISOString(), i: 'x' }),
      },
    ],
    [
      'a page_token of a time before year 1',
      'page_token',
      {
        page_token: forgedPageToken({ c: '-100000-01-01T00:00:00.000Z', i: randomUUID() }),
      },
    ],
    // Past google.protobuf.Timestamp's range (years 1 to 9999): an invalid Date, or a time
    // Postgres cannot compare with; the read failed, INTERNAL.
    [
      'a created_after of 2^53 - 1 seconds',
      'created_after',
      { created_after: { seconds: '9007199254740991', nanos: 0 } },
    ],
    [
      'a created_before before year 1',
      'created_before',
      { created_before: { seconds: '-8000000000000', nanos: 0 } },
    ],
    [
      'a created_before whose nanos are negative',
      'created_before',
      { created_before: { seconds: '0', nanos: -1 } },
    ],
    ['a negative page_size', 'page_size', { page_size: -1 }],
    ['an unknown status (enum number 99)', 'status', { status: 99 }],
    ['a type that is not a valid name', 'type', { type: 'Not A Type' }],
  ] as const) {
    it(`refuses ${what} → INVALID_ARGUMENT naming ${field}`, async () => {
      await expectInvalidField(raw.unary('ListTasks', body, bearer(apiKey)), field);
    });
  }

  it('returns every task once across pages, newest first', async () => {
    const lister = fx.client(await fx.tenantWithKey('lister'));
    const created: Task[] = [];
    for (let i = 0; i < 7; i++) {
      const { task } = await lister.createTask(
        request({ input: { ...VALID_INPUT, topic: `topic ${i}` } }),
      );
      created.push(task);
    }
    const pages: Task[][] = [];
    let pageToken = '';
    do {
      const page = await lister.listTasks({ page_size: 3, page_token: pageToken });
      pages.push(page.tasks);
      pageToken = page.next_page_token;
      assert.ok(pages.length <= 3, 'the listing ends');
    } while (pageToken !== '');
    assert.deepEqual(
      pages.map((p) => p.length),
      [3, 3, 1],
    );
    const listed = pages.flat();
    const createdAt = (task: Task): number => {
      assert.ok(task.create_time, 'a task has a creation time');
      return fromTimestamp(task.create_time).getTime();
    };
    // Newest first; tasks created in the same millisecond by id, descending, as the keyset does.
    const newestFirst = [...created].sort(
      (a, b) => createdAt(b) - createdAt(a) || (b.task_id > a.task_id ? 1 : -1),
    );
    assert.deepEqual(
      listed.map((t) => t.task_id),
      newestFirst.map((t) => t.task_id),
      'each task once, newest first',
    );
    const all = await lister.listTasks({});
    assert.deepEqual(
      all.tasks.map((t) => t.task_id),
      newestFirst.map((t) => t.task_id),
      'the default page holds them all',
    );
    assert.equal(all.next_page_token, '');
    const cancelled = await lister.listTasks({ status: 'TASK_STATUS_CANCELLED' });
    assert.deepEqual(cancelled.tasks, [], 'the status filter applies');

    // A token continues the listing it came from, filters included, and no other.
    const queued = await lister.listTasks({ page_size: 3, status: 'TASK_STATUS_QUEUED' });
    const rest = await lister.listTasks({
      page_size: 10,
      status: 'TASK_STATUS_QUEUED',
      page_token: queued.next_page_token,
    });
    assert.deepEqual(
      [...queued.tasks, ...rest.tasks].map((t) => t.task_id),
      newestFirst.map((t) => t.task_id),
      'a filtered listing pages as an unfiltered one',
    );
    const firstPage = await lister.listTasks({ page_size: 3 });
    for (const otherFilters of [
      { status: 'TASK_STATUS_QUEUED' },
      { priority: 'PRIORITY_P1' },
      { type: 'other-type' },
      { created_after: { seconds: '0', nanos: 0 } },
    ]) {
      await expectInvalidField(
        raw.unary(
          'ListTasks',
          { page_token: firstPage.next_page_token, ...otherFilters },
          bearer(apiKey),
        ),
        'page_token',
      );
    }
  });
});

describe('lifecycle requests the table does not allow', () => {
  // A queued task may be paused or cancelled; approving, resuming or retrying it is refused.
  for (const method of ['ApproveTask', 'ResumeTask', 'RetryTask']) {
    it(`${method} of a queued task answers FAILED_PRECONDITION and changes nothing`, async () => {
      const { task } = await client.createTask(request({}));
      await fx.expectNoEffect(async () => {
        await expectStatus(
          raw.unary(method, { task_id: task.task_id, approved: true }, bearer(apiKey)),
          status.FAILED_PRECONDITION,
        );
      });
      assert.equal((await client.getTask(task.task_id)).task.status, 'TASK_STATUS_QUEUED');
    });
  }

  // Valid UTF-8, so it arrives; but the event's jsonb cannot store it (the write failed: INTERNAL).
  it('refuses a cancel reason holding U+0000, naming the field', async () => {
    const { task } = await client.createTask(request({}));
    await fx.expectNoEffect(async () => {
      await expectInvalidField(client.cancelTask(task.task_id, 'a\u0000b'), 'reason');
    });
    assert.equal((await client.getTask(task.task_id)).task.status, 'TASK_STATUS_QUEUED');
  });

  it('refuses an approval comment holding U+0000, naming the field', async () => {
    const { task } = await client.createTask(request({}));
    for (const type of ['start', 'await_approval'] as const) {
      const moved = await applyTransition(fx.database.db, {
        taskId: task.task_id,
        tenantId: 'acme',
        event: { type },
      });
      assert.ok(moved.ok, `the task takes ${type}`);
    }
    await fx.expectNoEffect(async () => {
      await expectInvalidField(
        raw.unary(
          'ApproveTask',
          { task_id: task.task_id, approved: false, comment: 'a\u0000b' },
          bearer(apiKey),
        ),
        'comment',
      );
    });
    assert.equal((await client.getTask(task.task_id)).task.status, 'TASK_STATUS_WAITING_APPROVAL');
  });

  it('refuses a cancel reason that is too long, naming the field', async () => {
    const { task } = await client.createTask(request({}));
    await fx.expectNoEffect(async () => {
      await expectInvalidField(client.cancelTask(task.task_id, 'x'.repeat(4_001)), 'reason');
    });
    assert.equal((await client.getTask(task.task_id)).task.status, 'TASK_STATUS_QUEUED');
  });

  it('refuses an approval comment that is too long, naming the field', async () => {
    const { task } = await client.createTask(request({}));
    await fx.expectNoEffect(async () => {
      await expectStatus(
        raw.unary(
          'ApproveTask',
          { task_id: task.task_id, approved: true, comment: 'x'.repeat(4_001) },
          bearer(apiKey),
        ),
        status.INVALID_ARGUMENT,
      );
    });
  });
});
