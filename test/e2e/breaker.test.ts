/**
 * The circuit breaker of a tool in the whole stack (issue 5): the fake tool fails, the governor
 * opens the breaker of `tool:flaky` from the executors' reports, and from the moment nothing of the
 * resource is in flight no call reaches the tool until the cool-down is over. Half-open lets one
 * probe through at a time; while the tool still fails the probe reopens the breaker; once the tool
 * is healthy again the probes close it, and every task — none of which failed for good while the
 * breaker was open — succeeds. The recorded transitions are exactly the expected path.
 *
 * The breaker's moves are watched on the `governorDecisions` subject, the same live view the
 * scheduler and the executors obey; the tool's call count is read at the moment each decision
 * arrives, so "calls while open" is measured against what the services were told.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { createBusCatalog, decodeDecision, type BreakerView } from '@sluice/bus';
import { natsUrl } from '@sluice/bus/testing';
import { startE2eStack, type E2eStack } from '../support/e2e-stack.js';
import { startFakeToolServer, type FakeToolServer } from '../support/fake-tool-server.js';
import { assertDatabaseInvariants } from '../support/invariants.js';
import { testScale } from '../support/test-scale.js';

const TASK_MODULE = path.join(
  path.dirname(fileURLToPath(import.meta.url)),
  'backpressure-task-types.ts',
);
const RESOURCE = 'tool:flaky';
/** Tasks created while the tool fails: `SLUICE_TEST_SCALE` when set, else a few. */
const TASKS = process.env['SLUICE_TEST_SCALE'] ? testScale() : 20;
/** Tasks run first against the healthy tool. */
const WARM_UP_TASKS = 3;
const PROBES = 1;
const COOL_DOWN_MS = 1_500;
/** How many tasks' statuses are read through GetTask while the breaker is open. */
const SAMPLED_WHILE_OPEN = 20;

type BreakerStatus = BreakerView | 'closed';

/** One change of the breaker as the decisions announced it. */
interface SeenChange {
  readonly status: BreakerStatus;
  /** The tool's call count when the decision arrived. */
  readonly calls: number;
  /** The most tool calls in flight at once in the period this change ended (set at the next). */
  peakBefore: number;
}

/**
 * Follows the breaker of {@link RESOURCE} in the governor's decisions: records every change of
 * its status with the tool's call count at that instant, and counts the decisions that repeat the
 * current status (so a test can wait until the services have surely heard it).
 */
class BreakerWatch {
  readonly changes: SeenChange[] = [];
  /** Decisions received since the last change (the change's own included). */
  repeats = 0;

  constructor(private readonly tool: FakeToolServer) {}

  get status(): BreakerStatus | undefined {
    return this.changes.at(-1)?.status;
  }

  see(status: BreakerStatus): void {
    if (status === this.status) {
      this.repeats += 1;
      return;
    }
    const previous = this.changes.at(-1);
    if (previous) previous.peakBefore = this.tool.maxInFlight;
    this.tool.resetPeaks();
    this.changes.push({ status, calls: this.tool.calls, peakBefore: 0 });
    this.repeats = 1;
  }
}

let e2e: E2eStack;
let tool: FakeToolServer;
let nc: NatsConnection;
let watch: BreakerWatch;

before(async () => {
  tool = await startFakeToolServer();
  e2e = await startE2eStack({
    label: 'breaker',
    maxConnections: 4,
    resources: [RESOURCE],
    env: {
      SLUICE_TASK_MODULES: TASK_MODULE,
      SLUICE_TEST_TOOL_URL: tool.baseUrl,
      SLUICE_SCHEDULER_POLL_MS: '100',
      SLUICE_GOVERNOR_INTERVAL_MS: '200',
      SLUICE_REPORT_INTERVAL_MS: '200',
      SLUICE_BREAKER_CONSECUTIVE_FAILURES: '3',
      SLUICE_BREAKER_COOL_DOWN_MS: String(COOL_DOWN_MS),
      SLUICE_BREAKER_PROBES: String(PROBES),
      SLUICE_BREAKER_SUCCESSES_TO_CLOSE: '2',
    },
  });
  watch = new BreakerWatch(tool);
  nc = await connect({ servers: natsUrl() });
  nc.subscribe(createBusCatalog(e2e.prefix).subjects.governorDecisions, {
    callback: (error, message) => {
      if (error) return;
      // Synchronously, so the call count is read before anything else this process handles.
      watch.see(decodeDecision(message.data).breakers?.[RESOURCE] ?? 'closed');
    },
  });
});

after(async () => {
  await nc?.close();
  await e2e?.stop();
  await tool?.stop();
});

/** Polls `probe` until it returns a value; fails after the deadline. */
async function eventually<T>(
  probe: () => T | undefined | Promise<T | undefined>,
  what: string,
  timeoutMs = 60_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Waits until the watch has seen `count` changes and returns the last; checks its status. */
async function nthChange(count: number, status: BreakerStatus): Promise<SeenChange> {
  const change = await eventually(
    () => watch.changes[count - 1],
    `the breaker's change #${count} (${status}) is announced; seen ${describeChanges()}`,
  );
  assert.equal(change.status, status, `change #${count}; seen ${describeChanges()}`);
  return change;
}

function describeChanges(): string {
  return watch.changes.map((c) => c.status).join(' → ') || 'nothing';
}

/**
 * Steps of the resource claimed or running (a call may still reach the tool), or finished with an
 * outcome the scheduler has not applied yet (their task still shows running).
 */
async function stepsInFlight(): Promise<number> {
  const [row] = await e2e.handle.sql<{ n: number }[]>`
    select count(*)::int as n from task_steps
    where resource = ${RESOURCE}
      and (status in ('dispatched', 'running')
        or (outcome is not null and outcome_applied_at is null))
  `;
  return row?.n ?? 0;
}

/**
 * Waits until the breaker has been announced open at least twice (every service has heard it)
 * and nothing of the resource is in flight, and returns the tool's call count then: from here on
 * no call may reach the tool while the breaker stays open.
 */
async function settleWhileOpen(changeIndex: number): Promise<number> {
  await eventually(
    async () =>
      watch.changes.length === changeIndex + 1 &&
      watch.repeats >= 2 &&
      tool.inFlight === 0 &&
      (await stepsInFlight()) === 0
        ? true
        : undefined,
    'the open breaker has stopped every step of the resource',
    30_000,
  );
  const calls = tool.calls;
  // Still open after the settle point was read: the cool-down did not end meanwhile.
  assert.equal(
    watch.changes.length,
    changeIndex + 1,
    `the breaker stayed open until the settle point (cool-down ${COOL_DOWN_MS} ms too short?); seen ${describeChanges()}`,
  );
  return calls;
}

/** Creates `count` tasks one after another, adding each id to `ids` as soon as it exists. */
async function createTasks(count: number, label: string, ids: string[] = []): Promise<string[]> {
  for (let index = 0; index < count; index += 1) {
    const { task } = await e2e.client.createTask({
      type: 'bp-tool',
      priority: 'PRIORITY_P1',
      input: { label: `${label}-${index}` },
    });
    ids.push(task.task_id);
  }
  return ids;
}

async function waitAllSucceeded(ids: readonly string[]): Promise<void> {
  await eventually(
    async () => {
      const [row] = await e2e.handle.sql<{ n: number }[]>`
        select count(*)::int as n from tasks where id = any(${ids}::uuid[]) and status = 'succeeded'
      `;
      return row?.n === ids.length ? true : undefined;
    },
    `all ${ids.length} tasks succeed`,
    120_000,
  );
  for (const id of ids) {
    const { task } = await e2e.client.getTask(id);
    assert.equal(task.status, 'TASK_STATUS_SUCCEEDED', `task ${id}`);
  }
}

/** `sluice_breaker_transitions_total` of the resource by `from→to`, from the governor's /metrics. */
async function metricTransitions(): Promise<Map<string, number>> {
  const started = await e2e.stack.governor.waitForMessage('governor started');
  const port = started['metrics_port'];
  assert.equal(typeof port, 'number', 'the governor reported its metrics port');
  const text = await (await fetch(`http://127.0.0.1:${String(port)}/metrics`)).text();
  const counts = new Map<string, number>();
  for (const line of text.split('\n')) {
    const match = /^sluice_breaker_transitions_total\{([^}]*)\}\s+(\S+)/.exec(line);
    if (!match) continue;
    const labels = new Map(
      [...(match[1] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]),
    );
    if (labels.get('resource') !== RESOURCE) continue;
    counts.set(`${labels.get('from')}→${labels.get('to')}`, Number(match[2]));
  }
  return counts;
}

describe('circuit breaker of a tool', () => {
  it('opens on failures, keeps calls off the tool while open, probes and closes again', async () => {
    // Healthy: tasks run and the breaker stays closed.
    const warmUp = await createTasks(WARM_UP_TASKS, 'healthy');
    await waitAllSucceeded(warmUp);
    await nthChange(1, 'closed');
    assert.equal(tool.failures, 0);

    // The tool fails: the breaker opens.
    tool.setFailing(true);
    // Created in the background: at a large scale this outlasts the cool-down, and tasks created
    // while the breaker is open must simply wait as well.
    const ids: string[] = [];
    const creating = createTasks(TASKS, 'flaky', ids);
    creating.catch(() => undefined); // awaited below; not an unhandled rejection meanwhile
    await nthChange(2, 'open');
    const settledCalls = await settleWhileOpen(1);

    // While open, the tasks wait to be retried; none has failed for good.
    const created = [...ids];
    const step = Math.max(1, Math.floor(created.length / SAMPLED_WHILE_OPEN));
    for (let index = 0; index < created.length; index += step) {
      const id = created[index] as string;
      const { task } = await e2e.client.getTask(id);
      assert.ok(
        task.status === 'TASK_STATUS_QUEUED' || task.status === 'TASK_STATUS_FAILED_RETRYABLE',
        `task ${id} waits while the breaker is open (is ${task.status})`,
      );
      assert.match(
        task.waiting_for,
        /circuit breaker of tool:flaky is open/,
        `GetTask says why task ${id} waits`,
      );
    }
    const [terminal] = await e2e.handle.sql<{ n: number }[]>`
      select count(*)::int as n from tasks where status in ('failed_terminal', 'succeeded')
        and id = any(${created}::uuid[])
    `;
    assert.equal(terminal?.n, 0, 'no task of the failing tool is final while the breaker is open');

    // Cool-down over: half-open, the tool still fails, a probe reopens the breaker.
    const halfOpen = await nthChange(3, 'half_open');
    assert.equal(
      halfOpen.calls - settledCalls,
      0,
      'no call reached the tool between the settle point and half-open',
    );
    const reopened = await nthChange(4, 'open');
    assert.ok(reopened.calls > halfOpen.calls, 'a probe called the tool while half-open');
    assert.ok(
      halfOpen.peakBefore <= PROBES,
      `at most ${PROBES} probe(s) at once while half-open (saw ${halfOpen.peakBefore})`,
    );

    // The tool recovers; once nothing is in flight, again no call until half-open.
    tool.setFailing(false);
    const settledAgain = await settleWhileOpen(3);
    const halfOpenAgain = await nthChange(5, 'half_open');
    assert.equal(
      halfOpenAgain.calls - settledAgain,
      0,
      'no call reached the tool while the breaker was open again',
    );
    await nthChange(6, 'closed');
    assert.ok(
      halfOpenAgain.peakBefore <= PROBES,
      `at most ${PROBES} probe(s) at once while half-open (saw ${halfOpenAgain.peakBefore})`,
    );

    // Every task succeeds, and the breaker's record is the expected path.
    assert.equal((await creating).length, TASKS);
    await waitAllSucceeded(ids);
    assert.equal(watch.status, 'closed', `the breaker stays closed; seen ${describeChanges()}`);
    const transitions = await e2e.handle.sql<{ from_status: string; to_status: string }[]>`
      select from_status, to_status from breaker_transitions
      where resource = ${RESOURCE} order by id
    `;
    assert.deepEqual(
      transitions.map((t) => `${t.from_status}→${t.to_status}`),
      ['closed→open', 'open→half_open', 'half_open→open', 'open→half_open', 'half_open→closed'],
    );
    const [stored] = await e2e.handle.sql<{ status: string }[]>`
      select status from breakers where resource = ${RESOURCE}
    `;
    assert.equal(stored?.status, 'closed');

    const metrics = await metricTransitions();
    assert.deepEqual(
      Object.fromEntries([...metrics].sort(([a], [b]) => a.localeCompare(b))),
      { 'closed→open': 1, 'half_open→closed': 1, 'half_open→open': 1, 'open→half_open': 2 },
      'sluice_breaker_transitions_total counts every transition',
    );

    await assertDatabaseInvariants(e2e.handle, { requireFinal: true });
  });
});
