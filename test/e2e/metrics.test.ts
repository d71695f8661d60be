/**
 * Every service's `/metrics` carries the catalogue, and each metric moves as a run implies (issue 6,
 * "done when" 2). A stack with one executor (`tool:metrics`) runs seven tasks against a scripted
 * HTTP tool (metrics-task-types.ts):
 * - four `mt-fetch` at P1/P2, two of which hit a tool failing their first call (one retry each);
 * - one `mt-approve` at P0, approved by the test;
 * - one `mt-block` at P3, cancelled by the test while its step runs (the cancel completes in the
 *   scheduler, not in the gateway);
 * - one `mt-dead` at P3, whose call times out twice: one retry, then a dead letter.
 * The test scrapes each service's `/metrics` (the port from its `started` log line), parsing the
 * Prometheus text format itself, and compares every count with what Postgres recorded: tasks
 * created by priority, retries by error class (from `task_events`), dead letters by reason, task
 * wait and run histograms by the tasks started and finished, one approval wait, one cancellation
 * (and none counted by the gateway), gRPC requests by method and code; worker utilization of the
 * executor's resource rises while a step runs and falls back to 0; queue depth and the governor's
 * signals are on the governor. Counts, not timings; every wait is for a condition.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createServer, type ServerResponse } from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { METRIC_DEFINITIONS } from '@sluice/telemetry';
import { startE2eStack, type E2eStack } from '../support/e2e-stack.js';
import type { ServiceProcess } from '../support/service-process.js';
import { METRICS_RESOURCE } from './metrics-task-types.js';

const TASK_MODULE = path.join(
  path.dirname(fileURLToPath(import.meta.url)),
  'metrics-task-types.ts',
);

// ---- The scripted tool: /ok/<key> answers 200, /flaky/<key> 500 once then 200, /hang/<key> never

interface ScriptedTool {
  url(path: string): string;
  stop(): Promise<void>;
}

async function startScriptedTool(): Promise<ScriptedTool> {
  const failedOnce = new Set<string>();
  const hanging = new Set<ServerResponse>();
  const server = createServer((req, res) => {
    const [, kind, key = ''] = (req.url ?? '/').split('/');
    if (kind === 'hang') {
      hanging.add(res);
      res.on('close', () => hanging.delete(res));
      return;
    }
    if (kind === 'flaky' && !failedOnce.has(key)) {
      failedOnce.add(key);
      res.writeHead(500).end('try again');
      return;
    }
    res.writeHead(kind === 'ok' || kind === 'flaky' ? 200 : 404).end('fine');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  assert.ok(address && typeof address === 'object');
  const base = `http://127.0.0.1:${String(address.port)}`;
  return {
    url: (p) => `${base}${p}`,
    async stop() {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

// ---- Prometheus text format --------------------------------------------------------------------

interface Sample {
  readonly name: string;
  readonly labels: ReadonlyMap<string, string>;
  readonly value: number;
}

interface Scrape {
  /** Names with a `# HELP` line (a metric with no series yet still has one). */
  readonly described: ReadonlySet<string>;
  readonly samples: readonly Sample[];
}

const SAMPLE_LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

/** Parses the text exposition format (version 0.0.4): HELP lines and samples. */
function parseExposition(text: string): Scrape {
  const described = new Set<string>();
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line.startsWith('# HELP ')) {
      described.add(line.split(' ')[2] ?? '');
      continue;
    }
    if (line === '' || line.startsWith('#')) continue;
    const match = SAMPLE_LINE.exec(line);
    assert.ok(match, `unparsable exposition line: ${line}`);
    const labels = new Map<string, string>();
    for (const [, name, raw] of (match[2] ?? '').matchAll(LABEL)) {
      labels.set(
        name ?? '',
        (raw ?? '').replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c)),
      );
    }
    samples.push({ name: match[1] ?? '', labels, value: Number(match[3]) });
  }
  return { described, samples };
}

/** The sum of the samples named `name` whose labels include `labels`; 0 when there are none. */
function sum(scrape: Scrape, name: string, labels: Record<string, string> = {}): number {
  return matching(scrape, name, labels).reduce((total, s) => total + s.value, 0);
}

function matching(scrape: Scrape, name: string, labels: Record<string, string> = {}): Sample[] {
  return scrape.samples.filter(
    (s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels.get(k) === v),
  );
}

/** The values of `label` among the samples named `name`. */
function labelValues(scrape: Scrape, name: string, label: string): Set<string> {
  return new Set(
    matching(scrape, name).flatMap((s) => {
      const value = s.labels.get(label);
      return value === undefined ? [] : [value];
    }),
  );
}

const N = {
  created: METRIC_DEFINITIONS.tasksCreated.name,
  retries: METRIC_DEFINITIONS.retryCount.name,
  deadLetters: METRIC_DEFINITIONS.deadLetterCount.name,
  cancellations: METRIC_DEFINITIONS.cancellations.name,
  wait: METRIC_DEFINITIONS.taskWaitTime.name,
  run: METRIC_DEFINITIONS.taskRunTime.name,
  approvalWait: METRIC_DEFINITIONS.approvalWaitTime.name,
  utilization: METRIC_DEFINITIONS.workerUtilization.name,
  queueDepth: METRIC_DEFINITIONS.queueDepth.name,
  signal: METRIC_DEFINITIONS.governorSignal.name,
  level: METRIC_DEFINITIONS.governorLevel.name,
  grpc: METRIC_DEFINITIONS.grpcRequests.name,
  grpcDuration: METRIC_DEFINITIONS.grpcRequestDuration.name,
  relayed: METRIC_DEFINITIONS.eventsRelayed.name,
};

// ---- The stack ---------------------------------------------------------------------------------

let tool: ScriptedTool;
let e2e: E2eStack;
const ports = new Map<string, number>();

async function metricsPort(service: ServiceProcess, startedMsg: string): Promise<number> {
  const started = await service.waitForMessage(startedMsg);
  const port = started['metrics_port'];
  assert.equal(typeof port, 'number', `${startedMsg}: metrics port reported`);
  return port as number;
}

async function scrape(service: string): Promise<Scrape> {
  const port = ports.get(service);
  assert.ok(port !== undefined, `no metrics port of ${service}`);
  const response = await fetch(`http://127.0.0.1:${String(port)}/metrics`);
  assert.equal(response.status, 200);
  return parseExposition(await response.text());
}

/** Polls `probe` until it returns a value; fails after the deadline. */
async function eventually<T>(
  probe: () => Promise<T | undefined>,
  what: string,
  timeoutMs = 60_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function statusOf(taskId: string): Promise<string> {
  return (await e2e.client.getTask(taskId)).task.status;
}

const FINAL = new Set([
  'TASK_STATUS_SUCCEEDED',
  'TASK_STATUS_FAILED_TERMINAL',
  'TASK_STATUS_CANCELLED',
]);

/** What the run did, as Postgres recorded it. */
interface Recorded {
  readonly createdByPriority: Map<string, number>;
  readonly retriesByClass: Map<string, number>;
  readonly deadLettersByReason: Map<string, number>;
  /** Tasks whose first step started, by `priority/type`. */
  readonly startedBy: Map<string, number>;
  /** Tasks in a final state that had started, by `priority/type`. */
  readonly finishedBy: Map<string, number>;
  readonly cancelled: number;
  readonly approved: number;
  readonly events: number;
}

async function recorded(): Promise<Recorded> {
  const sql = e2e.handle.sql;
  const counts = (rows: readonly { key: string | null; n: string | number }[]) =>
    new Map(rows.map((r) => [r.key ?? 'null', Number(r.n)]));
  const created = await sql<{ key: string; n: string }[]>`
    select 'P' || priority as key, count(*) as n from tasks group by priority`;
  const retries = await sql<{ key: string; n: string }[]>`
    select data->>'error_class' as key, count(*) as n from task_events
    where type in ('fail_retryable', 'step_retry_scheduled') group by 1`;
  const letters = await sql<{ key: string; n: string }[]>`
    select reason as key, count(*) as n from dead_letters group by reason`;
  const started = await sql<{ key: string; n: string }[]>`
    select 'P' || t.priority || '/' || t.type as key, count(*) as n from tasks t
    where exists (select 1 from task_events e where e.task_id = t.id and e.type = 'start')
    group by 1`;
  const finished = await sql<{ key: string; n: string }[]>`
    select 'P' || t.priority || '/' || t.type as key, count(*) as n from tasks t
    where t.status in ('succeeded', 'failed_terminal', 'cancelled')
      and exists (select 1 from task_events e where e.task_id = t.id and e.type = 'start')
    group by 1`;
  const [cancelled] = await sql<{ n: string }[]>`
    select count(*) as n from tasks where status = 'cancelled'`;
  const [approved] = await sql<{ n: string }[]>`
    select count(*) as n from task_events where type = 'approve'`;
  const [events] = await sql<{ n: string }[]>`select count(*) as n from task_events`;
  return {
    createdByPriority: counts(created),
    retriesByClass: counts(retries),
    deadLettersByReason: counts(letters),
    startedBy: counts(started),
    finishedBy: counts(finished),
    cancelled: Number(cancelled?.n),
    approved: Number(approved?.n),
    events: Number(events?.n),
  };
}

/** Metric values by the labels of `keyOf`, for comparing with a {@link Recorded} map. */
function byLabels(
  s: Scrape,
  name: string,
  keyOf: (labels: ReadonlyMap<string, string>) => string,
): Map<string, number> {
  const values = new Map<string, number>();
  for (const sample of matching(s, name)) {
    const key = keyOf(sample.labels);
    values.set(key, (values.get(key) ?? 0) + sample.value);
  }
  return new Map([...values].filter(([, v]) => v !== 0));
}

const sorted = (map: ReadonlyMap<string, number>) =>
  Object.fromEntries([...map].sort(([a], [b]) => a.localeCompare(b)));

let sawBusy = 0;
let db: Recorded;
const scrapes = new Map<string, Scrape>();

before(async () => {
  tool = await startScriptedTool();
  e2e = await startE2eStack({
    label: 'metrics',
    resources: [METRICS_RESOURCE],
    env: {
      SLUICE_TASK_MODULES: TASK_MODULE,
      SLUICE_SCHEDULER_POLL_MS: '100',
      SLUICE_GOVERNOR_INTERVAL_MS: '200',
      SLUICE_REPORT_INTERVAL_MS: '200',
      // The test's failures must not open the tool's breaker (which would hold its steps).
      SLUICE_BREAKER_CONSECUTIVE_FAILURES: '10000',
      SLUICE_BREAKER_MIN_CALLS: '100000',
    },
  });
  const executor = e2e.stack.executors.get(METRICS_RESOURCE);
  assert.ok(executor, 'the executor of tool:metrics runs');
  ports.set('gateway', await metricsPort(e2e.stack.gateway, 'gateway started'));
  ports.set('scheduler', await metricsPort(e2e.stack.scheduler, 'scheduler started'));
  ports.set('governor', await metricsPort(e2e.stack.governor, 'governor started'));
  ports.set('executor', await metricsPort(executor, 'executor started'));

  const create = async (type: string, priority: string, input: Record<string, unknown>) =>
    (await e2e.client.createTask({ type, priority: priority as 'PRIORITY_P0', input })).task
      .task_id;
  const ids = [
    await create('mt-fetch', 'PRIORITY_P1', { url: tool.url('/ok/a') }),
    await create('mt-fetch', 'PRIORITY_P1', { url: tool.url('/ok/b') }),
    await create('mt-fetch', 'PRIORITY_P2', { url: tool.url('/flaky/a') }),
    await create('mt-fetch', 'PRIORITY_P2', { url: tool.url('/flaky/b') }),
    await create('mt-dead', 'PRIORITY_P3', { url: tool.url('/hang/dead') }),
  ];
  const approval = await create('mt-approve', 'PRIORITY_P0', {});
  const blocked = await create('mt-block', 'PRIORITY_P3', { url: tool.url('/hang/block') });
  ids.push(approval, blocked);

  // The blocked step holds a slot: utilization is above 0 until it is cancelled.
  await eventually(
    async () => ((await statusOf(blocked)) === 'TASK_STATUS_RUNNING' ? true : undefined),
    'the blocking task runs',
  );
  sawBusy = await eventually(async () => {
    const value = sum(await scrape('executor'), N.utilization, { resource: METRICS_RESOURCE });
    return value > 0 ? value : undefined;
  }, 'the executor reports a busy slot');
  await e2e.client.cancelTask(blocked, 'metrics test');

  await eventually(
    async () => ((await statusOf(approval)) === 'TASK_STATUS_WAITING_APPROVAL' ? true : undefined),
    'the approval is asked',
  );
  await e2e.client.approveTask(approval, { approved: true, comment: 'yes' });

  for (const id of ids) {
    await eventually(
      async () => (FINAL.has(await statusOf(id)) ? true : undefined),
      `task ${id} is final`,
    );
  }
  await assert.rejects(e2e.client.getTask(randomUUID()), /NOT_FOUND|not found/i);

  db = await recorded();
  // Every event relayed (the relay derives the lifecycle metrics from them) and the executor idle.
  await eventually(
    async () => {
      const s = await scrape('scheduler');
      return sum(s, N.relayed) === db.events ? s : undefined;
    },
    `the relay published all ${String(db.events)} events`,
  );
  await eventually(async () => {
    const s = await scrape('executor');
    return sum(s, N.utilization, { resource: METRICS_RESOURCE }) === 0 ? true : undefined;
  }, 'the executor is idle again');
  await eventually(async () => {
    const s = await scrape('governor');
    return labelValues(s, N.queueDepth, 'resource').has(METRICS_RESOURCE) ? true : undefined;
  }, 'the governor reports the queue depth of tool:metrics');
  for (const service of ['gateway', 'scheduler', 'governor', 'executor']) {
    scrapes.set(service, await scrape(service));
  }
});

after(async () => {
  await e2e?.stop();
  await tool?.stop();
});

function scraped(service: string): Scrape {
  const s = scrapes.get(service);
  assert.ok(s, `no scrape of ${service}`);
  return s;
}

describe('the metrics of a run', () => {
  it('every service exposes the whole catalogue', () => {
    for (const service of ['gateway', 'scheduler', 'governor', 'executor']) {
      const { described } = scraped(service);
      for (const def of Object.values(METRIC_DEFINITIONS)) {
        assert.ok(described.has(def.name), `${service} does not expose ${def.name}`);
      }
    }
  });

  it('the run did what the test planned', () => {
    assert.deepEqual(sorted(db.createdByPriority), { P0: 1, P1: 2, P2: 2, P3: 2 });
    assert.deepEqual(sorted(db.retriesByClass), { external_5xx: 2, tool_timeout: 1 });
    assert.deepEqual(sorted(db.deadLettersByReason), { attempts_exhausted: 1 });
    assert.equal(db.cancelled, 1);
    assert.equal(db.approved, 1);
  });

  it('counts created tasks by priority on the gateway', () => {
    const gateway = scraped('gateway');
    assert.deepEqual(
      sorted(byLabels(gateway, N.created, (l) => l.get('priority') ?? '')),
      sorted(db.createdByPriority),
    );
  });

  it('counts retries by error class and dead letters by reason on the scheduler', () => {
    const scheduler = scraped('scheduler');
    assert.deepEqual(
      sorted(byLabels(scheduler, N.retries, (l) => l.get('error_class') ?? '')),
      sorted(db.retriesByClass),
    );
    assert.deepEqual(
      sorted(byLabels(scheduler, N.deadLetters, (l) => l.get('reason') ?? '')),
      sorted(db.deadLettersByReason),
    );
  });

  it('observes one wait per started task and one run per finished task, by priority and type', () => {
    const scheduler = scraped('scheduler');
    const key = (l: ReadonlyMap<string, string>) =>
      `${l.get('priority') ?? ''}/${l.get('type') ?? ''}`;
    assert.deepEqual(sorted(byLabels(scheduler, `${N.wait}_count`, key)), sorted(db.startedBy));
    assert.deepEqual(sorted(byLabels(scheduler, `${N.run}_count`, key)), sorted(db.finishedBy));
    assert.equal(sum(scheduler, `${N.wait}_count`), 7);
    assert.equal(sum(scheduler, `${N.run}_count`), 7);
    assert.ok(sum(scheduler, `${N.run}_sum`) > 0, 'run times are positive');
  });

  it('observes the approval wait and counts the cancellation once', () => {
    const scheduler = scraped('scheduler');
    assert.deepEqual(
      sorted(byLabels(scheduler, `${N.approvalWait}_count`, (l) => l.get('decision') ?? '')),
      {
        approved: db.approved,
      },
    );
    assert.equal(sum(scheduler, N.cancellations), db.cancelled);
    // The gateway only asked to cancel a running task: the scheduler's count is the only one.
    assert.equal(sum(scraped('gateway'), N.cancellations), 0);
  });

  it('counts gRPC calls by method and status name, and times the unary ones', () => {
    const gateway = scraped('gateway');
    assert.equal(sum(gateway, N.grpc, { method: 'CreateTask', code: 'OK' }), 7);
    assert.equal(sum(gateway, N.grpc, { method: 'CancelTask', code: 'OK' }), 1);
    assert.equal(sum(gateway, N.grpc, { method: 'ApproveTask', code: 'OK' }), 1);
    assert.equal(sum(gateway, N.grpc, { method: 'GetTask', code: 'NOT_FOUND' }), 1);
    assert.ok(sum(gateway, N.grpc, { method: 'GetTask', code: 'OK' }) > 0);
    assert.equal(sum(gateway, `${N.grpcDuration}_count`, { method: 'CreateTask' }), 7);
  });

  it('reports worker utilization of the executor resource, busy then idle', () => {
    assert.ok(sawBusy > 0 && sawBusy <= 1, `utilization while a step ran: ${String(sawBusy)}`);
    const series = matching(scraped('executor'), N.utilization, { resource: METRICS_RESOURCE });
    assert.equal(series.length, 1);
    assert.equal(series[0]?.value, 0);
  });

  it('reports queue depth by priority and the governor signals on the governor', () => {
    const governor = scraped('governor');
    const priorities = new Set(
      matching(governor, N.queueDepth, { resource: METRICS_RESOURCE }).map((s) =>
        s.labels.get('priority'),
      ),
    );
    assert.deepEqual([...priorities].sort(), ['P0', 'P1', 'P2', 'P3']);
    const signals = labelValues(governor, N.signal, 'signal');
    for (const signal of [
      'queue_depth',
      'worker_busy_ratio',
      'db_connection_usage',
      'retry_storm',
    ]) {
      assert.ok(signals.has(signal), `governor signal ${signal} (has ${[...signals].join(', ')})`);
    }
    assert.equal(matching(governor, N.level).length, 1);
  });
});
