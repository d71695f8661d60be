/**
 * The governor does not flap (issue 5, done-when 5): a real governor against the machine's NATS
 * and Postgres reads a queue depth that the test makes oscillate around a threshold, and the
 * decisions it publishes are counted.
 *
 * - Crossing both the enter and the exit threshold on every toggle, the level may change at most
 *   about twice per dwell time (escalation is immediate, every step down waits the dwell); the
 *   raw signal crosses many times more often, so the bound is what hysteresis buys.
 * - Oscillating inside the band between exit and enter, the level does not change at all.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  closeNats,
  connectNats,
  createBusCatalog,
  decodeDecision,
  type GovernorDecision,
} from '@sluice/bus';
import { deletePrefixResources, natsUrl, uniquePrefix } from '@sluice/bus/testing';
import type { NatsConnection } from '@nats-io/transport-node';
import {
  createTask,
  createTenant,
  migrateDatabase,
  openDatabase,
  registerTaskType,
  type DatabaseHandle,
} from '@sluice/db';
import {
  createTestDatabase,
  migratedTemplate,
  oneStepManifest,
  type TestDatabase,
} from '@sluice/db/testing';
import { createLogger } from '@sluice/telemetry';
import { startGovernor, type Governor } from '../../services/governor/src/app.js';
import { loadGovernorConfig } from '../../services/governor/src/config.js';

const DWELL_MS = 1_000;
const ENTER = 50;
const EXIT = 30;
const WINDOW_MS = 6_000;
const TOGGLE_MS = 120;

const manifest = oneStepManifest({ resource: 'tool:flap', name: 'flap' });

let database: TestDatabase;
let handle: DatabaseHandle;
let nc: NatsConnection;
let governor: Governor;
/** The run's NATS prefix (its streams and buckets are removed from the shared server after). */
const prefix = uniquePrefix('flap');
const decisions: Array<{ atMs: number; decision: GovernorDecision }> = [];

before(async () => {
  database = await createTestDatabase({ template: await migratedTemplate(migrateDatabase) });
  handle = openDatabase(database.url, { max: 2 });
  await createTenant(handle.db, { id: 'acme' });
  await registerTaskType(handle.db, manifest);
  for (let i = 0; i < 60; i++) {
    await createTask(handle.db, {
      tenantId: 'acme',
      taskType: manifest,
      priority: 3,
      input: { i },
    });
  }
  nc = await connectNats({ url: natsUrl(), name: 'no-flapping-test' });
  nc.subscribe(createBusCatalog(prefix).subjects.governorDecisions, {
    callback: (error, message) => {
      if (!error)
        decisions.push({ atMs: performance.now(), decision: decodeDecision(message.data) });
    },
  });
  const config = loadGovernorConfig({
    NATS_URL: natsUrl(),
    DATABASE_URL: database.url,
    SLUICE_PREFIX: prefix,
    SLUICE_LOG_LEVEL: 'warn',
    SLUICE_GOVERNOR_INTERVAL_MS: '50',
    SLUICE_GOVERNOR_THRESHOLDS: JSON.stringify({
      queue_depth: [{ level: 'throttle', enter: ENTER, exit: EXIT, dwell_ms: DWELL_MS }],
    }),
  });
  governor = await startGovernor(config, createLogger({ service: 'governor', level: 'warn' }));
});

after(async () => {
  await governor?.stop();
  if (nc) await closeNats(nc);
  await deletePrefixResources(natsUrl(), prefix);
  await handle?.close();
  await database?.drop();
});

/** Makes exactly `depth` of the 60 ready steps due now (the others due in an hour). */
async function setDepth(depth: number): Promise<void> {
  await handle.sql`
    update task_steps s set due_at = case when r.rank <= ${depth} then now() - interval '1 second'
                                          else now() + interval '1 hour' end
    from (select id, row_number() over (order by id) as rank from task_steps) r
    where r.id = s.id
  `;
}

/**
 * Waits until the governor publishes a decision at `level` that read the queue depth as `depth`.
 * The level alone is not enough: the governor reads the depth at a pace its cost allows
 * (paced-read.ts), so a decision at the level wanted can still stand on an older reading, and
 * move once the dwell of that reading's level runs out.
 */
async function untilSeen(depth: number, level: string): Promise<void> {
  const deadline = performance.now() + 20_000;
  const seen = (decision: GovernorDecision | undefined) =>
    decision?.level === level &&
    (decision.signals ?? []).some((r) => r.signal === 'queue_depth' && r.value === depth);
  while (!seen(decisions.at(-1)?.decision)) {
    assert.ok(performance.now() < deadline, `the governor read ${depth} and reached ${level}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Toggles the depth between `low` and `high` for the window; returns the level changes seen. */
async function oscillate(low: number, high: number): Promise<{ changes: number; toggles: number }> {
  const start = performance.now();
  let toggles = 0;
  while (performance.now() - start < WINDOW_MS) {
    await setDepth(toggles % 2 === 0 ? high : low);
    toggles += 1;
    await new Promise((resolve) => setTimeout(resolve, TOGGLE_MS));
  }
  const seen = decisions.filter((d) => d.atMs >= start && d.atMs <= start + WINDOW_MS);
  let changes = 0;
  for (let i = 1; i < seen.length; i++) {
    if (seen[i]?.decision.level !== seen[i - 1]?.decision.level) changes += 1;
  }
  return { changes, toggles };
}

describe('governor decisions under a load near a threshold', () => {
  it('change at most about twice per dwell time while the signal crosses both thresholds', async () => {
    await setDepth(0);
    await untilSeen(0, 'normal');
    const { changes, toggles } = await oscillate(EXIT - 5, ENTER + 5);
    const bound = 2 * Math.ceil(WINDOW_MS / DWELL_MS) + 1;
    assert.ok(
      toggles >= 3 * bound,
      `the signal crossed often (${toggles}) — else the bound says nothing`,
    );
    assert.ok(changes >= 2, `the decision did react (${changes} changes)`);
    assert.ok(changes <= bound, `${changes} level changes in ${WINDOW_MS} ms, at most ${bound}`);
  });

  it('do not change at all while the signal stays inside the band', async () => {
    await setDepth(ENTER + 5);
    await untilSeen(ENTER + 5, 'throttle');
    const { changes, toggles } = await oscillate(EXIT + 5, ENTER - 5);
    assert.ok(toggles > 10);
    assert.equal(changes, 0, 'inside the band the level holds');
    assert.equal(decisions.at(-1)?.decision.level, 'throttle');
    // And it still leaves the level once the signal really falls, after the dwell.
    await setDepth(0);
    await untilSeen(0, 'normal');
  });
});
