/**
 * Overload (issue 5, done-when 1): a flood of P3 tasks and a steady stream of P0 tasks on one LLM
 * whose rate limit the system is not told (the fake answers 429 with Retry-After above
 * `HIDDEN_CONCURRENCY` calls at once). Counted, not timed:
 *
 * - no P3 step is admitted while a P0 step of the same resource is ready (a trigger in the test's
 *   database records, at each claim, the P0 steps then waiting; aging is set beyond the run);
 * - P3 is throttled or held while the pressure lasts, and completes when it falls;
 * - `CreateTask` for P3 is answered `RESOURCE_EXHAUSTED` with a retry delay while the reject level
 *   holds; the test retries those creates with the same key after the delay;
 * - no task is lost: every key is one task, and every task succeeds;
 * - once the executors' adaptive limit has settled, 429s are a small share of the LLM's answers.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import type { Metadata } from '@grpc/grpc-js';
import {
  closeNats,
  connectNats,
  createBusCatalog,
  decodeDecision,
  type GovernorDecision,
} from '@sluice/bus';
import { natsUrl } from '@sluice/bus/testing';
import { isServiceError } from '@sluice/sdk/client';
import type { NatsConnection } from '@nats-io/transport-node';
import { decodeStatusDetails } from '../../services/gateway/src/grpc/status-details.js';
import { startE2eStack, type E2eStack } from '../support/e2e-stack.js';
import { startFakeLlmServer, type FakeLlmServer } from '../support/fake-llm-server.js';
import { assertDatabaseInvariants } from '../support/invariants.js';
import { testScale } from '../support/test-scale.js';

const TASK_MODULE = path.join(
  path.dirname(fileURLToPath(import.meta.url)),
  'backpressure-task-types.ts',
);
const API_KEY = 'sk-overload';
const HIDDEN_CONCURRENCY = 3;
const SCALE = testScale();
/** P3 tasks the flood sends at least, in waves of 10 (so a multiple of 10), and at most. */
const P3_TASKS = Math.ceil(SCALE / 10) * 10;
const MAX_P3_TASKS = 5 * P3_TASKS;
const P0_TASKS = Math.max(10, Math.round(SCALE / 6));
/** Ready steps above which P2/P3 creates are rejected (and below which they are taken again). */
const REJECT_ENTER = Math.max(20, Math.round(SCALE / 5));
const REJECT_EXIT = Math.round(REJECT_ENTER / 2);
const RESOURCE_EXHAUSTED = 8;
/** The share of 429s allowed once the adaptive limit has settled. */
const MAX_SETTLED_429_SHARE = 0.15;

let e2e: E2eStack;
let llm: FakeLlmServer;
let nc: NatsConnection;
const decisions: GovernorDecision[] = [];

before(async () => {
  llm = await startFakeLlmServer({
    apiKey: API_KEY,
    latencyMs: 100,
    hiddenLimit: { maxConcurrent: HIDDEN_CONCURRENCY, retryAfterMs: 300 },
  });
  e2e = await startE2eStack({
    label: 'overload',
    maxConnections: 4,
    resources: ['llm'],
    llmBaseUrl: llm.baseUrl,
    llmApiKey: API_KEY,
    env: {
      SLUICE_TASK_MODULES: TASK_MODULE,
      SLUICE_SCHEDULER_POLL_MS: '100',
      SLUICE_GOVERNOR_INTERVAL_MS: '200',
      SLUICE_REPORT_INTERVAL_MS: '200',
      SLUICE_GOVERNOR_WINDOW_MS: '2000',
      // Aging beyond the run: the count below allows no P3-before-P0 admission at all.
      SLUICE_PRIORITY_AGING_MS: '3600000',
      SLUICE_EXECUTOR_SLOTS: '16',
      SLUICE_LLM_INITIAL_CONCURRENCY: '8',
      SLUICE_LLM_DECREASE_INTERVAL_MS: '200',
      SLUICE_GOVERNOR_THRESHOLDS: JSON.stringify({
        queue_depth: [{ level: 'reject', enter: REJECT_ENTER, exit: REJECT_EXIT, dwell_ms: 500 }],
        llm_rate_limit: [
          { level: 'throttle', enter: 0.1, exit: 0.05, dwell_ms: 500 },
          { level: 'hold_p3', enter: 0.35, exit: 0.15, dwell_ms: 500 },
        ],
      }),
    },
  });
  // At each claim of a P3 step, how many P0 steps of its resource were ready and due (for longer
  // than a claim's snapshot can miss: a step committed while the claim ran is not counted).
  await e2e.handle.sql.unsafe(`
    create table test_p3_claims (step_id bigint, resource text, p0_ready int, at timestamptz);
    create function test_record_p3_claims() returns trigger language plpgsql as $$
    begin
      insert into test_p3_claims
      select n.id, n.resource,
        (select count(*) from task_steps r join tasks t on t.id = r.task_id
          where r.resource = n.resource and r.status = 'ready' and r.priority = 0
            and r.due_at <= statement_timestamp() - interval '250 milliseconds'
            and r.created_at <= statement_timestamp() - interval '250 milliseconds'
            and t.status in ('queued', 'running')
            and not t.cancel_requested and not t.pause_requested),
        clock_timestamp()
      from new_rows n join old_rows o on o.id = n.id
      where o.status = 'ready' and n.status = 'dispatched' and n.priority = 3;
      return null;
    end $$;
    create trigger test_record_p3_claims after update on task_steps
      referencing old table as old_rows new table as new_rows
      for each statement execute function test_record_p3_claims();
  `);
  nc = await connectNats({ url: natsUrl(), name: 'overload-test' });
  nc.subscribe(createBusCatalog(e2e.prefix).subjects.governorDecisions, {
    callback: (error, message) => {
      if (!error) decisions.push(decodeDecision(message.data));
    },
  });
});

after(async () => {
  if (nc) await closeNats(nc);
  await e2e?.stop();
  await llm?.stop();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Resolves once the governor has announced a decision: it leads, and the gateway, subscribed since
 * its start, obeys what it decides. The stack is up once the governor process started, which may
 * be before it leads; a flood sent before then is over before any reading of the queue.
 */
async function governorDeciding(): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (decisions.length === 0) {
    assert.ok(Date.now() < deadline, 'the governor announced a decision within 30 s');
    await sleep(20);
  }
}

/** The retry delay of a RESOURCE_EXHAUSTED answer (`google.rpc.RetryInfo`), in ms. */
function retryDelayOf(error: unknown): number | undefined {
  if (!isServiceError(error) || Number(error.code) !== RESOURCE_EXHAUSTED) return undefined;
  const metadata = (error as { metadata?: Metadata }).metadata;
  const bytes = metadata?.get('grpc-status-details-bin')[0];
  if (!(bytes instanceof Buffer)) return undefined;
  return decodeStatusDetails(bytes).retryDelayMs;
}

describe('overload: a P3 flood beside a steady P0 stream on a rate-limited LLM', () => {
  it('admits P0 first, sheds and holds P3 while under pressure, loses nothing', async (t) => {
    const { client, handle } = e2e;
    const created = new Map<string, string>();
    const rejected: Array<{ key: string; retryDelayMs: number }> = [];

    const create = async (
      key: string,
      priority: 'PRIORITY_P0' | 'PRIORITY_P3',
    ): Promise<boolean> => {
      try {
        const { task } = await client.createTask({
          type: 'bp-llm',
          priority,
          input: { label: key },
          idempotencyKey: key,
        });
        created.set(key, task.task_id);
        return true;
      } catch (error) {
        const retryDelayMs = retryDelayOf(error);
        if (retryDelayMs === undefined) throw error;
        assert.equal(priority, 'PRIORITY_P3', 'P0 is never rejected');
        rejected.push({ key, retryDelayMs });
        return false;
      }
    };

    await governorDeciding();

    // The LLM's counters over time, to measure 429s once the adaptive limit has settled.
    const samples: Array<ReturnType<FakeLlmServer['stats']>> = [];
    const sampler = setInterval(() => samples.push(llm.stats()), 100);
    // Also when an assertion fails first: a live interval kept the test file's process running
    // until the runner's timeout (15 min).
    t.after(() => clearInterval(sampler));

    // The flood (P3 in waves) and the stream (P0 one at a time) run side by side. The flood goes
    // on past P3_TASKS until a create is rejected (at most MAX_P3_TASKS): the governor enters the
    // reject level only after the queue was deep for its dwell, and a flood sent quickly enough
    // (a fast gateway, or a governor's tick late on a busy machine) was over before then.
    let p3Sent = 0;
    const flood = (async () => {
      const pending: string[] = [];
      while (p3Sent < P3_TASKS || (rejected.length === 0 && p3Sent < MAX_P3_TASKS)) {
        const keys = Array.from({ length: 10 }, (_, i) => `p3-${p3Sent + i}`);
        p3Sent += keys.length;
        const outcomes = await Promise.all(keys.map((key) => create(key, 'PRIORITY_P3')));
        keys.forEach((key, i) => {
          if (!outcomes[i]) pending.push(key);
        });
        await sleep(50);
      }
      return pending;
    })();
    const stream = (async () => {
      for (let i = 0; i < P0_TASKS; i += 1) {
        await create(`p0-${i}`, 'PRIORITY_P0');
        await sleep(150);
      }
    })();
    const [pending] = await Promise.all([flood, stream]);

    // Rejected creates come back after their delay with the same key, until taken.
    assert.ok(rejected.length > 0, 'the reject level was reached and P3 creates were shed');
    assert.ok(
      rejected.every((r) => r.retryDelayMs > 0),
      'every rejection carries a retry delay',
    );
    let retrying = pending;
    const deadline = Date.now() + 180_000;
    while (retrying.length > 0) {
      assert.ok(Date.now() < deadline, `${retrying.length} rejected creates were taken at last`);
      const delays = rejected.filter((r) => retrying.includes(r.key)).map((r) => r.retryDelayMs);
      await sleep(Math.max(...delays));
      const again: string[] = [];
      for (const key of retrying) if (!(await create(key, 'PRIORITY_P3'))) again.push(key);
      retrying = again;
    }

    // Every key is one task, and every task succeeds.
    assert.equal(created.size, p3Sent + P0_TASKS);
    for (const [key, id] of created) {
      const until = Date.now() + 180_000;
      for (;;) {
        const { task } = await client.getTask(id);
        if (task.status === 'TASK_STATUS_SUCCEEDED') break;
        assert.notEqual(task.status, 'TASK_STATUS_FAILED_TERMINAL', `${key} failed for good`);
        assert.ok(Date.now() < until, `${key} succeeded (is ${task.status})`);
        await sleep(100);
      }
    }
    const [{ tasks }] = await handle.sql<
      [{ tasks: number }]
    >`select count(*)::int as tasks from tasks`;
    assert.equal(tasks, p3Sent + P0_TASKS, 'no task lost, none duplicated');

    // P3 was throttled or held while the pressure lasted, and released afterwards.
    assert.ok(
      decisions.some((d) => d.holds.includes(3) || (d.throttle ?? []).includes(3)),
      'P3 was throttled or held at some point',
    );
    assert.ok(
      decisions.some((d) => d.reject.includes(3)),
      'P3 creates were rejected by decision',
    );

    // No P3 step was admitted while a P0 step of the LLM was waiting.
    const claims = await handle.sql<
      Array<{ p0_ready: number }>
    >`select p0_ready from test_p3_claims`;
    assert.ok(claims.length >= p3Sent, `every P3 step was claimed (${claims.length})`);
    const beforeP0 = claims.filter((c) => c.p0_ready > 0).length;
    assert.equal(beforeP0, 0, `${beforeP0} P3 claims while a P0 step was ready`);

    // After the adaptive limit settled (the first half of the calls), 429s are a small share.
    clearInterval(sampler);
    const final = llm.stats();
    assert.ok(
      final.maxInFlight > HIDDEN_CONCURRENCY,
      'the system was not told the limit: it probed past it',
    );
    const settled = samples.find((s) => s.calls >= final.calls / 2) ?? final;
    const later = final.calls - settled.calls;
    const share = (final.rateLimited - settled.rateLimited) / Math.max(1, later);
    assert.ok(later > 0);
    assert.ok(
      share < MAX_SETTLED_429_SHARE,
      `429s were ${(share * 100).toFixed(1)} % of the last ${later} calls (at most ${MAX_SETTLED_429_SHARE * 100} %); ` +
        `${((final.rateLimited / final.calls) * 100).toFixed(1)} % over the run`,
    );
    t.diagnostic(
      `${p3Sent} P3 tasks sent, ${rejected.length} creates of them rejected; ${claims.length} P3 claims; LLM calls ${final.calls}, ` +
        `429s ${final.rateLimited} (${((final.rateLimited / final.calls) * 100).toFixed(1)} %), ` +
        `after settling ${(share * 100).toFixed(1)} % of ${later}; max in flight ${final.maxInFlight}`,
    );
    await assertDatabaseInvariants(handle, { requireFinal: true });
  });
});
