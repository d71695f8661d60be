/**
 * `CreateTask` on what the gateway remembers, against the machine's real NATS and Postgres: once
 * the gateway has read a caller's key and a task type, the caller's next create of that type goes
 * to Postgres in one round trip instead of two (the insert confirms both), and what changed since
 * is still seen from the next call on: a revoked key is refused with no effect, and a newer
 * version of the type is the one the create is checked against and pins.
 */
import assert from 'node:assert/strict';
import { status } from '@grpc/grpc-js';
import { after, before, describe, it } from 'node:test';
import { DEFAULT_POOL_SIZE, hashApiKey, registerTaskType } from '@sluice/db';
import {
  describeTurn,
  preparesStatement,
  startTurnCounter,
  type ConnectionTurn,
  type TurnCounter,
} from '@sluice/db/testing';
import type { TaskClient } from '@sluice/sdk/client';
import { researchBrief } from '../../services/executor/src/builtin-tasks/research-brief.js';
import { manifestOf } from '../../services/executor/src/task-registry.js';
import {
  expectStatus,
  startGatewayFixture,
  type GatewayFixture,
} from '../support/gateway-fixture.js';

const INPUT = { topic: 'remembered reads', sourceUrl: 'https://example.com/remembered' };
const SMALL = { topic: 'p0', sourceUrl: 'https://e.x/' };

let fx: GatewayFixture;
let counter: TurnCounter | undefined;

before(async () => {
  fx = await startGatewayFixture('remembered', {
    gatewayDatabaseUrl: async (url) => {
      counter = await startTurnCounter(url);
      return counter.url;
    },
  });
});

after(async () => {
  await fx?.stop();
  await counter?.close();
});

function create(
  client: TaskClient,
  input: object = INPUT,
  idempotencyKey?: string,
  priority: 'PRIORITY_P0' | 'PRIORITY_P2' = 'PRIORITY_P2',
) {
  return client.createTask({
    type: researchBrief.name,
    priority,
    input,
    ...(idempotencyKey ? { idempotencyKey } : {}),
  });
}

/**
 * The Postgres round trips the gateway waits for while `action` runs, counted on each of its
 * connections (reads it starts at once on two connections are two).
 */
async function connectionTurnsOf(action: () => Promise<unknown>): Promise<ConnectionTurn[]> {
  assert.ok(counter);
  counter.reset();
  await action();
  return [...counter.connectionTurns()];
}

/**
 * {@link connectionTurnsOf}, taken again while one of the connections prepared a statement. A
 * statement is prepared on a connection at its first use there (a parse, then the rest of the
 * transaction one statement at a time), and which of the pool's connections a create's reads and
 * write take depends on when each came back: a create that prepared is a connection's first, not
 * the create's path. `action` must do the same each time (a create with a new idempotency key: one
 * with a used key answers its task on another path).
 */
async function preparedTurnsOf(action: () => Promise<unknown>): Promise<ConnectionTurn[]> {
  const tries: ConnectionTurn[][] = [];
  // Each try that prepares leaves a statement prepared for good: at most a few per connection.
  while (tries.length < 10 * DEFAULT_POOL_SIZE) {
    const turns = await connectionTurnsOf(action);
    if (!turns.some(preparesStatement)) return turns;
    tries.push(turns);
  }
  assert.fail(`every try prepared a statement:\n${shown(tries.slice(-3))}`);
}

/** Creates' turns, one create a line, for a failure message. */
function shown(creates: readonly (readonly ConnectionTurn[])[]): string {
  return creates
    .map((turns) => `${turns.length}: ${turns.map(describeTurn).join(' | ')}`)
    .join('\n');
}

describe('CreateTask on remembered reads', () => {
  it('takes one round trip once the key and type were read, with or without a key', async () => {
    // Another caller first, so that the type is remembered; this caller's key is not.
    const warm = fx.client(await fx.tenantWithKey('warm'));
    for (let i = 0; i < 3; i++) await create(warm);
    const client = fx.client(await fx.tenantWithKey('trips'));
    const first = await connectionTurnsOf(() => create(client));
    assert.ok(first.length >= 2, `the first reads the key, then writes\n${shown([first])}`);
    const unkeyed: ConnectionTurn[][] = [];
    const keyed: ConnectionTurn[][] = [];
    let keys = 0;
    for (let i = 0; i < 4; i++) {
      unkeyed.push(await preparedTurnsOf(() => create(client)));
      keyed.push(await preparedTurnsOf(() => create(client, INPUT, `keyed-${++keys}`)));
    }
    assert.deepEqual(
      [...unkeyed, ...keyed].map((turns) => turns.length),
      [1, 1, 1, 1, 1, 1, 1, 1],
      `the write alone, unkeyed and keyed\n${shown([...unkeyed, ...keyed])}`,
    );
  });

  it('reads the key and type for a P0 create, which claims its step, and writes it in one go', async () => {
    const client = fx.client(await fx.tenantWithKey('urgent'));
    const unkeyed: ConnectionTurn[][] = [];
    const keyed: ConnectionTurn[][] = [];
    let keys = 0; // a new key for each try: a key used before answers its task on another path
    for (let i = 0; i < 3; i++) {
      unkeyed.push(await preparedTurnsOf(() => create(client, SMALL, undefined, 'PRIORITY_P0')));
      keyed.push(await preparedTurnsOf(() => create(client, SMALL, `u-${++keys}`, 'PRIORITY_P0')));
    }
    // Counted on each connection: the key's read and the type's (a claiming create takes the
    // reading path, decisions.md), started at once on two connections; the create with its claim
    // in one write; then the stream sequence of the step it published: four (a transaction of
    // three round trips made it six). A keyed one's write, with its check, may pass 1,024 bytes,
    // where postgres.js sends what it has buffered at once: the rest follows without waiting for
    // an answer, but when the server answered the first piece before it arrived the proxy counts
    // one turn more.
    assert.deepEqual(
      unkeyed.map((turns) => turns.length),
      [4, 4, 4],
      `unkeyed: the two reads, the write and the record\n${shown(unkeyed)}`,
    );
    for (const turns of keyed) {
      assert.ok(
        turns.length === 4 || turns.length === 5,
        `keyed: the two reads, the write (in two pieces) and the record\n${shown(keyed)}`,
      );
    }
  });

  it('refuses a key revoked after the gateway remembered it, from the next call on, with no effect', async () => {
    const key = await fx.tenantWithKey('revoked-later');
    const client = fx.client(key);
    await create(client);
    await create(client); // on remembered reads
    await fx.database.sql`
      update api_keys set revoked_at = now() where key_hash = ${hashApiKey(key)}`;
    await fx.expectNoEffect(async () => {
      await expectStatus(create(client), status.UNAUTHENTICATED);
    });
    // And it stays refused: the gateway forgot the key with the refused create.
    await expectStatus(create(client), status.UNAUTHENTICATED);
  });

  it('checks a create against, and pins, a version registered after the type was remembered', async () => {
    const client = fx.client(await fx.tenantWithKey('versions'));
    await create(client);
    const v1 = manifestOf(researchBrief);
    await registerTaskType(fx.database.db, {
      ...v1,
      version: 2,
      inputSchema: {
        ...v1.inputSchema,
        required: [...((v1.inputSchema['required'] as string[] | undefined) ?? []), 'audience'],
      },
    });
    // Valid for version 1, not for version 2: the gateway must not check it against what it
    // remembered.
    await expectStatus(create(client), status.INVALID_ARGUMENT);
    const { task } = await create(client, { ...INPUT, audience: 'operators' });
    const [row] = await fx.database.sql<{ type_version: number }[]>`
      select type_version from tasks where id = ${task.task_id}`;
    assert.equal(row?.type_version, 2);
  });
});
