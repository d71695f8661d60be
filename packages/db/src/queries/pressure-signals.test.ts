/**
 * The governor's pressure signals against a real Postgres, each with known data: queue depth,
 * latency percentiles, retry share, connection usage — and plans that read indexes, not the whole
 * step history. Time is controlled through the rows' timestamps (relative to the statement's
 * `now()`), never by sleeping.
 */
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import { sql, type SQL } from 'drizzle-orm';
import type { DatabaseHandle } from '../client.js';
import { oneStepManifest, openTaskTypeDatabase, type TaskTypeDatabase } from '../testing/index.js';
import { createTask } from './tasks.js';
import { explainAnalyze } from './explain.js';
import {
  databaseConnectionUsage,
  queueDepths,
  retryShare,
  signalStatements,
  stepLatencies,
  type StepLatency,
} from './pressure-signals.js';

const manifest = oneStepManifest();

let fixture: TaskTypeDatabase;
let handle: DatabaseHandle;
let taskId: string;
let seq = 100;

before(async () => {
  fixture = await openTaskTypeDatabase({
    tenants: ['acme'],
    manifests: [manifest],
    max: 6,
  });
  handle = fixture.handle;
  ({
    task: { id: taskId },
  } = await createTask(handle.db, {
    tenantId: 'acme',
    taskType: manifest,
    priority: 2,
    input: {},
  }));
});

after(async () => {
  await fixture?.close();
});

beforeEach(async () => {
  await handle.db.execute(sql`delete from task_steps`);
});

/** Milliseconds before the statement's `now()`; negative: after it. */
function ago(ms: number | null): SQL {
  return ms === null ? sql`null` : sql`now() - make_interval(secs => ${ms / 1_000})`;
}

interface StepRow {
  readonly resource?: string;
  readonly priority?: number;
  readonly status: string;
  readonly attempts?: number;
  /** Times as milliseconds before now. */
  readonly due: number;
  readonly dispatched?: number | null;
  readonly started?: number | null;
  readonly finished?: number | null;
}

async function insertSteps(rows: readonly StepRow[], count = 1): Promise<void> {
  for (const row of rows) {
    for (let i = 0; i < count; i++) {
      await handle.db.execute(sql`
        insert into task_steps (task_id, seq, name, resource, tenant_id, priority, status, input,
          attempts, due_at, dispatched_at, started_at, finished_at)
        values (${taskId}, ${seq++}, 'only', ${row.resource ?? 'llm'}, 'acme', ${row.priority ?? 2},
          ${row.status}, '{}', ${row.attempts ?? 1}, ${ago(row.due)}, ${ago(row.dispatched ?? null)},
          ${ago(row.started ?? null)}, ${ago(row.finished ?? null)})
      `);
    }
  }
}

function close(actual: number | null, expected: number, what: string): void {
  assert.ok(
    actual !== null && Math.abs(actual - expected) < 0.5,
    `${what}: ${actual} ≉ ${expected}`,
  );
}

describe('queueDepths', () => {
  it('counts due ready steps by resource and priority, and in-flight steps by resource', async () => {
    await insertSteps([{ resource: 'tool:a', priority: 0, status: 'ready', due: 1_000 }], 3);
    await insertSteps([{ resource: 'tool:a', priority: 2, status: 'ready', due: 0 }]);
    await insertSteps([{ resource: 'tool:b', priority: 1, status: 'ready', due: 60_000 }], 2);
    // Waiting for a retry's due time: not queue pressure.
    await insertSteps([{ resource: 'tool:a', priority: 0, status: 'ready', due: -30_000 }], 2);
    await insertSteps(
      [{ resource: 'tool:a', status: 'dispatched', due: 5_000, dispatched: 1_000 }],
      2,
    );
    await insertSteps([{ resource: 'tool:a', status: 'running', due: 5_000, started: 1_000 }]);
    await insertSteps([{ resource: 'tool:b', status: 'running', due: 5_000, started: 1_000 }]);
    await insertSteps([{ resource: 'tool:a', status: 'succeeded', due: 9_000, finished: 1_000 }]);
    await insertSteps([{ resource: 'tool:c', status: 'failed', due: 9_000, finished: 1_000 }]);
    assert.deepEqual(await queueDepths(handle.db), {
      ready: [
        { resource: 'tool:a', priority: 0, ready: 3 },
        { resource: 'tool:a', priority: 2, ready: 1 },
        { resource: 'tool:b', priority: 1, ready: 2 },
      ],
      inFlight: [
        { resource: 'tool:a', inFlight: 3 },
        { resource: 'tool:b', inFlight: 1 },
      ],
    });
  });

  it('is empty with no steps', async () => {
    assert.deepEqual(await queueDepths(handle.db), { ready: [], inFlight: [] });
  });
});

describe('stepLatencies', () => {
  it('gives p95 wait and run time per priority over the window', async () => {
    // P1: 20 starts 10 s ago that waited 100 ms, 200 ms, … 2 000 ms after becoming due.
    for (let k = 1; k <= 20; k++) {
      await insertSteps([
        {
          priority: 1,
          status: 'running',
          due: 10_000 + k * 100,
          dispatched: 10_050,
          started: 10_000,
        },
      ]);
    }
    // P1: 10 steps started 120 s ago (before the window) that ran 62 s, 63 s, … 71 s.
    for (let k = 1; k <= 10; k++) {
      await insertSteps([
        {
          priority: 1,
          status: 'succeeded',
          due: 121_000,
          dispatched: 120_500,
          started: 120_000,
          finished: 120_000 - (61_000 + k * 1_000),
        },
      ]);
    }
    // P3: one start that waited 5 s, still running.
    await insertSteps([
      { priority: 3, status: 'running', due: 6_000, dispatched: 1_500, started: 1_000 },
    ]);
    // P2: dispatched four hours ago, started only now: counted, however old its dispatch.
    await insertSteps([
      {
        priority: 2,
        status: 'running',
        due: 4 * 3_600_000,
        dispatched: 4 * 3_600_000,
        started: 1_000,
      },
    ]);
    // Outside the sample: finished before the window; started, then put back for a retry (its
    // due time is after its start); never started.
    await insertSteps([
      {
        priority: 0,
        status: 'succeeded',
        due: 200_000,
        dispatched: 190_000,
        started: 180_000,
        finished: 170_000,
      },
      { priority: 0, status: 'ready', due: -5_000, dispatched: 20_000, started: 15_000 },
      { priority: 2, status: 'cancelled', due: 30_000, finished: 1_000 },
    ]);

    const latencies = await stepLatencies(handle.db, 60_000);
    assert.deepEqual(
      latencies.map(({ priority, started, finished }) => ({ priority, started, finished })),
      [
        { priority: 1, started: 20, finished: 10 },
        { priority: 2, started: 1, finished: 0 },
        { priority: 3, started: 1, finished: 0 },
      ],
    );
    const [p1, p2, p3] = latencies as [StepLatency, StepLatency, StepLatency];
    // percentile_cont interpolates: 95 % of the way through 20 samples lies between the 19th and 20th.
    close(p1.waitP95Ms, 1_905, 'P1 wait p95');
    close(p1.runP95Ms, 70_550, 'P1 run p95');
    close(p2.waitP95Ms, 4 * 3_600_000 - 1_000, 'P2 wait p95');
    close(p3.waitP95Ms, 5_000, 'P3 wait p95');
    assert.equal(p3.runP95Ms, null);

    // A wider window takes in the P0 step that finished 170 s ago, and the P1 starts before it.
    const wide = await stepLatencies(handle.db, 200_000);
    assert.deepEqual(
      wide.map(({ priority, started, finished }) => ({ priority, started, finished })),
      [
        { priority: 0, started: 1, finished: 1 },
        { priority: 1, started: 30, finished: 10 },
        { priority: 2, started: 1, finished: 0 },
        { priority: 3, started: 1, finished: 0 },
      ],
    );
  });

  it('is empty with nothing started or finished in the window', async () => {
    await insertSteps([{ status: 'ready', due: 0 }]);
    assert.deepEqual(await stepLatencies(handle.db, 60_000), []);
  });
});

describe('retryShare', () => {
  it('counts the starts in the window that were second or later attempts', async () => {
    await insertSteps(
      [{ status: 'running', attempts: 1, due: 3_000, dispatched: 2_000, started: 1_000 }],
      4,
    );
    await insertSteps(
      [
        {
          status: 'succeeded',
          attempts: 2,
          due: 9_000,
          dispatched: 8_000,
          started: 7_000,
          finished: 1_000,
        },
      ],
      2,
    );
    await insertSteps([
      { status: 'running', attempts: 3, due: 59_000, dispatched: 59_000, started: 58_000 },
    ]);
    // Before the window, and never started.
    await insertSteps([
      {
        status: 'failed',
        attempts: 5,
        due: 200_000,
        dispatched: 190_000,
        started: 120_000,
        finished: 110_000,
      },
    ]);
    await insertSteps([{ status: 'ready', attempts: 0, due: 1_000 }]);
    assert.deepEqual(await retryShare(handle.db, 60_000), { started: 7, retries: 3 });
    assert.deepEqual(await retryShare(handle.db, 130_000), { started: 8, retries: 4 });
  });
});

describe('databaseConnectionUsage', () => {
  it('counts client connections against the slots ordinary roles may use', async () => {
    const held = await Promise.all([
      handle.sql.reserve(),
      handle.sql.reserve(),
      handle.sql.reserve(),
    ]);
    try {
      const usage = await databaseConnectionUsage(handle.db);
      const rows = await handle.db.execute<{ here: number; max: number; reserved: number }>(sql`
        select
          (select count(*)::int from pg_stat_activity
            where datname = current_database() and backend_type = 'client backend') as here,
          (select setting::int from pg_settings where name = 'max_connections') as max,
          (select coalesce(sum(setting::int), 0)::int from pg_settings
            where name in ('superuser_reserved_connections', 'reserved_connections')) as reserved
      `);
      const expected = rows[0];
      assert.ok(expected);
      assert.equal(usage.max, expected.max - expected.reserved);
      assert.ok(usage.inUse >= expected.here && expected.here >= 4, `${usage.inUse} in use`);
      assert.ok(usage.inUse <= expected.max);
    } finally {
      for (const connection of held) connection.release();
    }
  });
});

describe('plans', () => {
  it('reads only the steps of the window, not the finished history, with thousands of old steps', async () => {
    // Days old, and (what a busy hour leaves) finished half an hour ago.
    await handle.db.execute(sql`
      insert into task_steps (task_id, seq, name, resource, tenant_id, priority, status, input,
        attempts, due_at, dispatched_at, started_at, finished_at)
      select ${taskId}, 10000 + g, 'only', 'tool:' || (g % 7), 'acme', g % 4, 'succeeded', '{}',
        1 + g % 2, now() - interval '3 days', now() - interval '3 days',
        now() - interval '3 days', now() - interval '2 days'
      from generate_series(1, 5000) g
    `);
    await handle.db.execute(sql`
      insert into task_steps (task_id, seq, name, resource, tenant_id, priority, status, input,
        attempts, due_at, dispatched_at, started_at, finished_at)
      select ${taskId}, 20000 + g, 'only', 'tool:' || (g % 7), 'acme', g % 4, 'succeeded', '{}',
        1, now() - interval '31 minutes', now() - interval '31 minutes',
        now() - interval '31 minutes', now() - interval '30 minutes'
      from generate_series(1, 5000) g
    `);
    await insertSteps([{ status: 'ready', due: 1_000 }], 5);
    await insertSteps([{ status: 'running', due: 3_000, dispatched: 2_000, started: 1_000 }], 5);
    await handle.db.execute(sql`analyze task_steps`);
    const statements = signalStatements(60_000);
    for (const [name, statement] of Object.entries(statements)) {
      const plan = (await explainAnalyze(handle.db, statement)).join('\n');
      assert.doesNotMatch(plan, /Seq Scan on task_steps/, `${name}:\n${plan}`);
      // Each index read returns the window's few steps (5 ready, 5 running, and entries of the
      // steps earlier tests deleted, which no vacuum has removed), not the 5,000 of the last hour.
      const scanned = [...plan.matchAll(/Index Scan[^\n]* on task_steps[^\n]*rows=(\d+) loops/g)];
      assert.ok(scanned.length > 0, `${name}: no index scan of task_steps:\n${plan}`);
      for (const [, rows] of scanned) assert.ok(Number(rows) < 1_000, `${name}:\n${plan}`);
    }
    // And the signal queries themselves run on that data.
    assert.equal((await queueDepths(handle.db)).ready[0]?.ready, 5);
    assert.equal((await retryShare(handle.db, 60_000)).started, 5);
    assert.equal((await stepLatencies(handle.db, 60_000))[0]?.started, 5);
  });
});
