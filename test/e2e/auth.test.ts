/**
 * Authentication and tenant isolation at the gateway, against the machine's real NATS and
 * Postgres: every RPC refuses a missing, malformed, unknown or revoked API key with
 * `UNAUTHENTICATED` before looking at the request, and with no effect; a task of another tenant is
 * `NOT_FOUND` to read, watch and cancel, as a missing one.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { Metadata, status } from '@grpc/grpc-js';
import type { Task } from '@sluice/api';
import { hashApiKey } from '@sluice/db';
import type { TaskClient } from '@sluice/sdk/client';
import {
  authorization,
  bearer,
  expectStatus,
  startGatewayFixture,
  type GatewayFixture,
  type RawTaskClient,
} from '../support/gateway-fixture.js';

const TYPE = 'research-brief';
const INPUT = { topic: 'isolation', sourceUrl: 'https://example.com/tenants' };

let fx: GatewayFixture;
let raw: RawTaskClient;
/** Tenant `acme`: its key, its client and one queued task. */
let acmeKey: string;
let acme: TaskClient;
let acmeTask: Task;
/** Tenant `globex`, who must not see acme's tasks. */
let globexKey: string;
let globex: TaskClient;
let revokedKey: string;

before(async () => {
  fx = await startGatewayFixture('auth');
  raw = fx.raw();
  acmeKey = await fx.tenantWithKey('acme');
  acme = fx.client(acmeKey);
  globexKey = await fx.tenantWithKey('globex');
  globex = fx.client(globexKey);
  revokedKey = await fx.tenantWithKey('initech');
  await fx.database.sql`
    update api_keys set revoked_at = now() where key_hash = ${hashApiKey(revokedKey)}`;
  ({ task: acmeTask } = await acme.createTask({
    type: TYPE,
    priority: 'PRIORITY_P2',
    input: INPUT,
    idempotencyKey: 'shared-key',
  }));
});

after(async () => {
  await fx?.stop();
});

/** A well-formed key no tenant has. */
function unknownKey(): string {
  return `slk_${randomBytes(24).toString('base64url')}`;
}

/** One valid request per RPC of acme's, sent raw; only the credentials will be wrong. */
const RPCS: readonly [method: string, request: () => object][] = [
  ['CreateTask', () => ({ type: TYPE, priority: 'PRIORITY_P1', input: JSON.stringify(INPUT) })],
  ['GetTask', () => ({ task_id: acmeTask.task_id })],
  ['WatchTask', () => ({ task_id: acmeTask.task_id, after_seq: '0' })],
  ['ListTasks', () => ({})],
  ['CancelTask', () => ({ task_id: acmeTask.task_id, reason: 'by an intruder' })],
  ['ApproveTask', () => ({ task_id: acmeTask.task_id, approved: true, comment: 'intruder' })],
  ['PauseTask', () => ({ task_id: acmeTask.task_id })],
  ['ResumeTask', () => ({ task_id: acmeTask.task_id })],
  ['RetryTask', () => ({ task_id: acmeTask.task_id })],
];

/** Credentials that must not authenticate, as the metadata they are sent in. */
const BAD_CREDENTIALS: readonly [what: string, metadata: () => Metadata][] = [
  ['no authorization metadata', () => new Metadata()],
  ['an empty authorization value', () => authorization('')],
  [
    'another scheme (Basic)',
    () => authorization(`Basic ${Buffer.from('acme:x').toString('base64')}`),
  ],
  ['the key without a scheme', () => authorization(acmeKey)],
  ['Bearer without a key', () => authorization('Bearer')],
  ['Bearer with a blank key', () => authorization('Bearer   ')],
  ['Bearer with two tokens', () => authorization(`Bearer ${acmeKey} ${acmeKey}`)],
  ['Bearer with characters no key has', () => authorization(`Bearer ${acmeKey}*`)],
  ['a key far too long', () => bearer(`slk_${'a'.repeat(4_096)}`)],
  // Node's HTTP/2 refuses to send `authorization` twice, so a client that tries joins the values.
  ['two keys in one value', () => authorization(`Bearer ${acmeKey}, Bearer ${globexKey}`)],
  ['a wrong key', () => bearer(unknownKey())],
  // Its last character replaced by another (one in 64 keys already ends in '_').
  [
    'a valid key with one character changed',
    () => bearer(`${acmeKey.slice(0, -1)}${acmeKey.endsWith('_') ? '-' : '_'}`),
  ],
  ['a revoked key', () => bearer(revokedKey)],
];

function call(method: string, request: object, metadata: Metadata): Promise<unknown> {
  return method === 'WatchTask'
    ? raw.watch(request, metadata)
    : raw.unary(method, request, metadata);
}

describe('every RPC answers UNAUTHENTICATED to bad credentials, with no effect', () => {
  for (const [method, request] of RPCS) {
    for (const [what, metadata] of BAD_CREDENTIALS) {
      it(`${method} with ${what}`, async () => {
        await fx.expectNoEffect(async () => {
          const error = await expectStatus(
            call(method, request(), metadata()),
            status.UNAUTHENTICATED,
          );
          assert.doesNotMatch(error.details, /acme|globex|slk_/, 'the answer reveals nothing');
        });
      });
    }
  }

  it('checks credentials before the request: an invalid request without a key is UNAUTHENTICATED', async () => {
    const invalid: [string, object][] = [
      ['CreateTask', { type: 'Not A Type', priority: 9, input: '{' }],
      ['GetTask', { task_id: 'not-a-uuid' }],
      ['WatchTask', { task_id: '', after_seq: '-1' }],
      ['ListTasks', { page_size: 10_000, page_token: 'garbage' }],
      ['CancelTask', { task_id: '' }],
    ];
    await fx.expectNoEffect(async () => {
      for (const [method, request] of invalid) {
        await expectStatus(call(method, request, new Metadata()), status.UNAUTHENTICATED);
      }
    });
  });

  it('left acme’s task as it was', async () => {
    const { task } = await acme.getTask(acmeTask.task_id);
    assert.equal(task.status, 'TASK_STATUS_QUEUED');
    assert.equal(task.cancel_requested, false);
    assert.equal(task.last_event_seq, '1', 'only the create event');
  });
});

describe('the same requests with a valid key succeed', () => {
  it('accepts the scheme in any case, as RFC 7235 says', async () => {
    const response = (await raw.unary(
      'GetTask',
      { task_id: acmeTask.task_id },
      authorization(`bearer ${acmeKey}`),
    )) as { task: Task };
    assert.equal(response.task.task_id, acmeTask.task_id);
  });

  it('answers every RPC', async () => {
    const [create, get, , list] = RPCS;
    const created = (await raw.unary(create?.[0] ?? '', create?.[1]() ?? {}, bearer(acmeKey))) as {
      task: Task;
      created: boolean;
    };
    assert.equal(created.created, true);
    assert.equal(created.task.tenant_id, 'acme', 'the tenant comes from the key');
    const got = (await raw.unary(get?.[0] ?? '', get?.[1]() ?? {}, bearer(acmeKey))) as {
      task: Task;
    };
    assert.equal(got.task.task_id, acmeTask.task_id);
    const listed = (await raw.unary(list?.[0] ?? '', list?.[1]() ?? {}, bearer(acmeKey))) as {
      tasks: Task[];
    };
    assert.deepEqual(
      new Set(listed.tasks.map((t) => t.task_id)),
      new Set([acmeTask.task_id, created.task.task_id]),
    );
    for await (const event of acme.watchTask(created.task.task_id)) {
      assert.equal(event.type, 'create');
      break; // the task is still queued: its stream would go on
    }
    const cancelled = await acme.cancelTask(created.task.task_id, 'by its owner');
    assert.equal(cancelled.task.status, 'TASK_STATUS_CANCELLED');
  });
});

describe('another tenant’s task is NOT_FOUND', () => {
  it('to every method that names a task, and changes nothing', async () => {
    await fx.expectNoEffect(async () => {
      await expectStatus(globex.getTask(acmeTask.task_id), status.NOT_FOUND);
      await expectStatus(
        raw.watch({ task_id: acmeTask.task_id }, bearer(globexKey)),
        status.NOT_FOUND,
      );
      await expectStatus(globex.cancelTask(acmeTask.task_id, 'not mine'), status.NOT_FOUND);
      // Even where the table would refuse the request (a queued task cannot be approved, resumed
      // or retried), another tenant learns nothing: NOT_FOUND, as for a missing id.
      await expectStatus(
        globex.approveTask(acmeTask.task_id, { approved: true }),
        status.NOT_FOUND,
      );
      await expectStatus(
        globex.approveTask(acmeTask.task_id, { approved: false }),
        status.NOT_FOUND,
      );
      await expectStatus(globex.pauseTask(acmeTask.task_id), status.NOT_FOUND);
      await expectStatus(globex.resumeTask(acmeTask.task_id), status.NOT_FOUND);
      await expectStatus(globex.retryTask(acmeTask.task_id), status.NOT_FOUND);
    });
    const { task } = await acme.getTask(acmeTask.task_id);
    assert.equal(task.status, 'TASK_STATUS_QUEUED');
    assert.equal(task.last_event_seq, '1');
  });

  it('and absent from ListTasks', async () => {
    const { tasks } = await globex.listTasks({});
    assert.ok(
      tasks.every((t) => t.tenant_id === 'globex'),
      'globex lists only its own tasks',
    );
    assert.ok(!tasks.some((t) => t.task_id === acmeTask.task_id));
  });

  it('an idempotency key is per tenant: the same key makes globex its own task', async () => {
    const { task, created } = await globex.createTask({
      type: TYPE,
      priority: 'PRIORITY_P2',
      input: INPUT,
      idempotencyKey: 'shared-key',
    });
    assert.equal(created, true);
    assert.notEqual(task.task_id, acmeTask.task_id);
    assert.equal(task.tenant_id, 'globex');
  });
});
