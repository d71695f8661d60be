/**
 * `SLUICE_DB_POOL_SIZE` caps the Postgres connections of every service, and the smallest pool it
 * accepts (2) still moves work: a burst of tasks created all at once ends with each task succeeded
 * while no service held more than two connections. With the default pools the same burst has the
 * gateway open all ten of its connections and the scheduler five (the executor two, the governor
 * one), so the test fails where the setting does not reach the gateway or the scheduler.
 *
 * A pool opens connections as its statements need them and keeps them, so the backends each
 * service holds after the burst are the most it held during it. The scheduler's `LISTEN`
 * connection (the event relay's wake-up) is a client of its own, outside the pool, and not counted.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { startE2eStack, type E2eStack } from '../support/e2e-stack.js';
import { POOL_RESOURCE, psQuick } from './pool-size-task-types.js';

const TASK_MODULE = path.join(
  path.dirname(fileURLToPath(import.meta.url)),
  'pool-size-task-types.ts',
);
const POOL_SIZE = 2;
/** Tasks created at once: far more than a pool of two serves without queueing. */
const TASKS = 200;

let e2e: E2eStack;

before(async () => {
  e2e = await startE2eStack({
    label: 'pool-size',
    resources: [POOL_RESOURCE],
    env: { SLUICE_TASK_MODULES: TASK_MODULE, SLUICE_DB_POOL_SIZE: String(POOL_SIZE) },
  });
});

after(async () => {
  await e2e?.stop();
});

/** Tasks of the test's database by status. */
async function taskStatuses(): Promise<Map<string, number>> {
  const rows = await e2e.handle.sql<{ status: string; tasks: number }[]>`
    select status, count(*)::int as tasks from tasks group by status`;
  return new Map(rows.map((row) => [row.status, row.tasks]));
}

/** Backends of each Sluice service on the test's database, less the scheduler's `LISTEN` client. */
async function poolBackends(): Promise<Map<string, number>> {
  const rows = await e2e.handle.sql<{ service: string; backends: number }[]>`
    select application_name as service, count(*)::int as backends
      from pg_stat_activity
     where datname = current_database()
       and application_name like 'sluice-%'
       and query not ilike 'listen %'
     group by application_name`;
  return new Map(rows.map((row) => [row.service, row.backends]));
}

describe('SLUICE_DB_POOL_SIZE', () => {
  it('caps every service at its pool, and two connections still move a burst of work', async () => {
    const created = await Promise.all(
      Array.from({ length: TASKS }, (_, n) =>
        e2e.client.createTask({ type: psQuick.name, priority: 'PRIORITY_P2', input: { n } }),
      ),
    );
    assert.equal(new Set(created.map((response) => response.task?.task_id)).size, TASKS);

    const deadline = Date.now() + 120_000;
    let statuses = await taskStatuses();
    while ((statuses.get('succeeded') ?? 0) < TASKS) {
      assert.ok(
        Date.now() < deadline,
        `not every task succeeded: ${JSON.stringify([...statuses])}`,
      );
      await new Promise((resolve) => setTimeout(resolve, 50));
      statuses = await taskStatuses();
    }
    assert.deepEqual([...statuses], [['succeeded', TASKS]]);

    const backends = await poolBackends();
    for (const service of [
      'sluice-gateway',
      'sluice-scheduler',
      'sluice-governor',
      `sluice-executor-${POOL_RESOURCE}`,
    ]) {
      const held = backends.get(service) ?? 0;
      assert.ok(
        held >= 1 && held <= POOL_SIZE,
        `${service} held ${held} connections: ${JSON.stringify([...backends])}`,
      );
    }
  });
});
