/**
 * The gateway's warm-up of its pool against a real Postgres: `prepareCreates` leaves nothing behind,
 * and afterwards no create on any of the pool's connections prepares a statement (each one a
 * connection's first would). Counted through a proxy that tells what each round trip sent.
 */
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { openDatabase, type DatabaseHandle } from '../client.js';
import {
  describeTurn,
  oneStepManifest,
  openTaskTypeDatabase,
  preparesStatement,
  startTurnCounter,
  type TaskTypeDatabase,
  type TurnCounter,
} from '../testing/index.js';
import { prepareCreates } from './create-warm-up.js';
import { submitTasksClaiming } from './task-batch.js';
import { findLatestTaskTypes } from './task-types.js';
import { createApiKey, findKeyOwners, hashApiKey } from './tenants.js';
import type { RememberedReads } from './remembered-reads.js';

const CONNECTIONS = 4;

const manifest = oneStepManifest();

let fixture: TaskTypeDatabase;
let proxy: TurnCounter;
let through: DatabaseHandle;

beforeEach(async () => {
  fixture = await openTaskTypeDatabase({ tenants: ['acme'], manifests: [manifest], max: 2 });
  proxy = await startTurnCounter(fixture.database.url);
  through = openDatabase(proxy.url, { max: CONNECTIONS });
});

afterEach(async () => {
  await through?.close();
  await proxy?.close();
  await fixture?.close();
});

async function rowCounts(): Promise<Record<string, number>> {
  const [row] = await fixture.handle.sql<Record<string, number>[]>`
    select (select count(*)::int from tenants) as tenants,
           (select count(*)::int from tasks) as tasks,
           (select count(*)::int from task_steps) as task_steps,
           (select count(*)::int from task_events) as task_events`;
  assert.ok(row);
  return row;
}

/** The reads and the three kinds of create a gateway makes, one after the other. */
async function createAsTheGatewayDoes(apiKey: string, n: number): Promise<void> {
  const owners = await findKeyOwners(through.db, [apiKey]);
  assert.equal(owners.get(apiKey)?.tenantId, 'acme');
  const types = await findLatestTaskTypes(through.db, [manifest.name]);
  const registered = types.get(manifest.name);
  assert.ok(registered);
  const remembered: RememberedReads = {
    keyHashes: [hashApiKey(apiKey)],
    types: [{ name: manifest.name, version: 1, registeredStamp: registered.registeredStamp }],
  };
  const task = { tenantId: 'acme', taskType: manifest, priority: 2 as const, input: { n } };
  await submitTasksClaiming(through.db, [task], undefined); // no key: the insert alone
  await submitTasksClaiming(through.db, [{ ...task, idempotencyKey: `k-${n}` }], undefined);
  await submitTasksClaiming(
    through.db,
    [{ ...task, idempotencyKey: `r-${n}` }],
    undefined,
    remembered,
  );
}

describe('prepareCreates', () => {
  it('leaves no tenant, task, step or event behind', async () => {
    const before = await rowCounts();
    await prepareCreates(through.db, CONNECTIONS);
    assert.deepEqual(await rowCounts(), before);
  });

  it('prepares what a create runs on every connection: no create after it prepares a statement', async () => {
    const apiKey = await createApiKey(fixture.handle.db, { tenantId: 'acme' });
    await prepareCreates(through.db, CONNECTIONS);
    proxy.reset();
    // Creates side by side, so each takes connections of its own (the pool hands out the one idle
    // last: one after the other, they would all run on one or two).
    for (let round = 0; round < 3; round++) {
      await Promise.all(
        Array.from({ length: CONNECTIONS }, (_, i) =>
          createAsTheGatewayDoes(apiKey, round * CONNECTIONS + i),
        ),
      );
    }
    const turns = proxy.connectionTurns();
    const connections = new Set(turns.map((turn) => turn.connection));
    assert.equal(connections.size, CONNECTIONS, 'every connection took part');
    const preparing = turns.filter(preparesStatement);
    assert.deepEqual(preparing.map(describeTurn), [], 'no statement prepared after the warm-up');
  });

  it('is what makes the difference: without it the first creates prepare', async () => {
    const apiKey = await createApiKey(fixture.handle.db, { tenantId: 'acme' });
    await through.sql`select 1`; // a connection open, so its opening does not count
    proxy.reset();
    await createAsTheGatewayDoes(apiKey, 0);
    const preparing = proxy.connectionTurns().filter(preparesStatement);
    assert.ok(preparing.length > 0, 'a fresh pool prepares its statements on first use');
  });
});
