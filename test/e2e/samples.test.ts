/**
 * The three sample task types end to end, as a user runs them: the services as separate processes
 * with executors for `llm`, `tool:http`, `file` and `db`, the fake LLM and a fake web site over
 * HTTP, a real gRPC client. Each sample exercises a part of the model: approval and fan-out
 * (`research-report`), fan-out with branches of two steps writing to Postgres (`document-ingestion`)
 * and a loop of two steps continuing each other (`agent-loop`).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { DatabaseHandle } from '@sluice/db';
import type { TaskClient } from '@sluice/sdk/client';
import type { Task, TaskEvent, TaskStatus } from '@sluice/api';
import { startFakeLlmServer, type FakeLlmServer } from '../support/fake-llm-server.js';
import {
  DEFAULT_PAGES,
  startFakeWebServer,
  type FakeWebServer,
} from '../support/fake-web-server.js';
import { startE2eStack, type E2eStack } from '../support/e2e-stack.js';

const TASK_DEADLINE_MS = 60_000;

const CITIES_CSV = 'city,country,population\nOslo,Norway,709000\n"Lima","Peru","10,000,000"\n';
const ORDERS_JSON = JSON.stringify([
  { id: 1, item: 'queue', paid: true },
  { id: 2, item: 'lease', paid: false },
]);

let e2e: E2eStack;
let handle: DatabaseHandle;
let llm: FakeLlmServer;
let web: FakeWebServer;
let client: TaskClient;

before(async () => {
  llm = await startFakeLlmServer({});
  web = await startFakeWebServer({
    pages: { ...DEFAULT_PAGES, '/data/cities.csv': CITIES_CSV },
  });
  e2e = await startE2eStack({
    label: 'samples',
    llmBaseUrl: llm.baseUrl,
    resources: ['llm', 'tool:http', 'file', 'db'],
    env: { SLUICE_SCHEDULER_POLL_MS: '200', SLUICE_WATCH_RECHECK_MS: '500' },
  });
  ({ handle, client } = e2e);
});

after(async () => {
  await e2e?.stop();
  await llm?.stop();
  await web?.stop();
});

async function create(type: string, input: unknown): Promise<string> {
  const { task } = await client.createTask({ type, priority: 'PRIORITY_P1', input });
  return task.task_id;
}

/** Follows the task's events until one reaches `status` (or the task ends); returns them. */
async function watchUntil(taskId: string, status: TaskStatus): Promise<TaskEvent[]> {
  const events: TaskEvent[] = [];
  const stop = new AbortController();
  const deadline = AbortSignal.any([stop.signal, AbortSignal.timeout(TASK_DEADLINE_MS)]);
  for await (const event of client.watchTask(taskId, 0, deadline)) {
    events.push(event);
    if (event.to_status === status) stop.abort();
  }
  return events;
}

/** The task once it succeeded, with its events; fails with the task's error otherwise. */
async function succeeded(taskId: string): Promise<{ task: Task; events: TaskEvent[] }> {
  const events = await watchUntil(taskId, 'TASK_STATUS_SUCCEEDED');
  const { task } = await client.getTask(taskId);
  assert.equal(
    task.status,
    'TASK_STATUS_SUCCEEDED',
    `task ${taskId} is ${task.status}: ${JSON.stringify(task.error)}`,
  );
  return { task, events };
}

/** The `step_succeeded` events by step name, in order. */
function stepsRun(events: readonly TaskEvent[]): string[] {
  return events.filter((e) => e.type === 'step_succeeded').map((e) => e.step);
}

describe('sample task types end to end', () => {
  it('research-report: outline, approval through the API, pages fanned out, summary', async () => {
    const sources = [
      web.url('/articles/backpressure'),
      web.url('/articles/priorities'),
      web.url('/gone'),
    ];
    const taskId = await create('research-report', { topic: 'admission control', sources });

    const waiting = await watchUntil(taskId, 'TASK_STATUS_WAITING_APPROVAL');
    assert.equal(waiting.at(-1)?.to_status, 'TASK_STATUS_WAITING_APPROVAL');
    const { task: pending } = await client.getTask(taskId);
    assert.match(pending.approval?.prompt ?? '', /^Approve this outline for "admission control"\?/);
    assert.match(
      pending.approval?.prompt ?? '',
      /Summary: Outline a research report about: admission control/,
    );
    assert.equal(
      web.hits.get('/articles/backpressure'),
      undefined,
      'nothing fetched before approval',
    );

    await client.approveTask(taskId, { approved: true, comment: 'Stress the shedding order' });
    const { task, events } = await succeeded(taskId);
    const output = JSON.parse(task.output) as {
      outline: string;
      reviewerComment: string;
      report: string;
      sources: Array<{ url: string; status: number; title: string | null }>;
    };
    assert.equal(output.outline, 'Summary: Outline a research report about: admission control');
    assert.equal(output.reviewerComment, 'Stress the shedding order');
    assert.match(output.report, /^Summary: Write the report on admission control\./);
    assert.deepEqual(
      output.sources.map((s) => [s.url, s.status, s.title]),
      [
        [sources[0], 200, 'Backpressure'],
        [sources[1], 200, 'Priorities'],
        [sources[2], 404, null],
      ],
      'one branch per source, joined in source order',
    );
    assert.equal(web.hits.get('/articles/backpressure'), 1);
    assert.deepEqual(stepsRun(events).sort(), [
      'fetchPage',
      'fetchPage',
      'fetchPage',
      'outline',
      'summarize',
    ]);
    assert.equal(stepsRun(events).at(-1), 'summarize', 'the join runs once, last');
    assert.ok(
      events.some((e) => e.type === 'step_progress'),
      'progress reaches watchers',
    );
  });

  it('document-ingestion: documents parsed in parallel, rows written once to Postgres', async () => {
    const taskId = await create('document-ingestion', {
      documents: [
        { name: 'cities.csv', format: 'csv', url: web.url('/data/cities.csv') },
        { name: 'orders.json', format: 'json', content: ORDERS_JSON },
        { name: 'notes.txt', format: 'text', url: web.url('/notes.txt') },
        { name: 'inline.csv', format: 'csv', content: 'a,b\n1,2\n3,4\n5,6\n' },
      ],
    });
    const { task, events } = await succeeded(taskId);
    const output = JSON.parse(task.output) as {
      table: string;
      totalRows: number;
      documents: Array<{ name: string; rows: number; inserted: number; persisted: number }>;
    };
    assert.equal(output.table, 'sluice_samples.ingested_rows');
    assert.deepEqual(
      output.documents.map((d) => [d.name, d.rows, d.inserted, d.persisted]),
      [
        ['cities.csv', 2, 2, 2],
        ['orders.json', 2, 2, 2],
        ['notes.txt', 1, 1, 1],
        ['inline.csv', 3, 3, 3],
      ],
    );
    assert.equal(output.totalRows, 8);
    const rows = await handle.sql<Array<{ document_name: string; data: Record<string, unknown> }>>`
      select document_name, data from sluice_samples.ingested_rows
      where task_id = ${taskId} order by document, row_index`;
    assert.equal(rows.length, 8);
    assert.deepEqual(rows[1], {
      document_name: 'cities.csv',
      data: { city: 'Lima', country: 'Peru', population: '10,000,000' },
    });
    const steps = stepsRun(events);
    assert.equal(steps.filter((s) => s === 'parse').length, 4);
    assert.equal(steps.filter((s) => s === 'store').length, 4);
    assert.equal(steps.at(-1), 'report');
  });

  it('document-ingestion: a document that does not parse fails the task as schema_validation', async () => {
    const taskId = await create('document-ingestion', {
      documents: [{ name: 'broken.csv', format: 'csv', content: 'a,b\n1\n' }],
    });
    await watchUntil(taskId, 'TASK_STATUS_FAILED_TERMINAL');
    const { task } = await client.getTask(taskId);
    assert.equal(task.status, 'TASK_STATUS_FAILED_TERMINAL');
    assert.equal(task.error?.error_class, 'ERROR_CLASS_SCHEMA_VALIDATION');
    assert.match(task.error?.message ?? '', /record 1 has 1 fields; the header has 2/);
  });

  it('agent-loop: the LLM reads the allowed pages one by one, then answers', async () => {
    const urls = [web.url('/articles/backpressure'), web.url('/notes.txt')];
    const taskId = await create('agent-loop', { goal: 'How do queues protect services?', urls });
    const { task, events } = await succeeded(taskId);
    const output = JSON.parse(task.output) as {
      stoppedBy: string;
      pagesRead: number;
      turns: number;
      answer: string;
      history: Array<{ url: string; status: number }>;
    };
    assert.equal(output.stoppedBy, 'llm');
    assert.equal(output.pagesRead, 2);
    assert.equal(output.turns, 3);
    assert.deepEqual(
      output.history.map((h) => [h.url, h.status]),
      urls.map((url) => [url, 200]),
    );
    assert.match(output.answer, /^Summary: DONE is next/);
    assert.deepEqual(stepsRun(events), ['decide', 'callTool', 'decide', 'callTool', 'decide']);
  });

  it('agent-loop: stops after maxTurns calls', async () => {
    const urls = [web.url('/articles/backpressure'), web.url('/articles/priorities')];
    const taskId = await create('agent-loop', { goal: 'Summarise priorities', urls, maxTurns: 1 });
    const { task } = await succeeded(taskId);
    const output = JSON.parse(task.output) as { stoppedBy: string; pagesRead: number };
    assert.deepEqual([output.stoppedBy, output.pagesRead], ['max_turns', 1]);
  });
});
