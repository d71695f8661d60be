/**
 * One task is one trace (issue 6, "done when" 1). Every service exports over OTLP/HTTP protobuf to
 * a real receiver on loopback (test/support/otlp-receiver.ts), configured only by the standard
 * `OTEL_*` variables, and a three-step task runs: `fetch` calls a flaky HTTP tool (500, then 200:
 * one retry), `ask` waits for the approval the test gives, `summarize` calls the fake LLM. The
 * test then reads the whole tree:
 * - one trace id for everything of the task, the one `GetTask` reports;
 * - spans from the gateway, the scheduler and both executors (`service.name`);
 * - parent links: the `CreateTask` server span is the root; each dispatch is a scheduler `send`
 *   span under it; each step attempt is a child of its dispatch; HTTP client and `chat` spans are
 *   under the step spans;
 * - the retry: two attempts of `fetch`, the first in error, and the retry event;
 * - database client spans: the create transaction under the create span, each attempt's start and
 *   outcome under its dispatch, the scheduler's claims in traces of their own;
 * - every state change of the task's history as a span event, in order.
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import type { TaskEvent } from '@sluice/api';
import {
  ATTR_STEP,
  ATTR_STEP_ATTEMPT,
  ATTR_TASK_EVENT,
  ATTR_TASK_ID,
  ATTR_TASK_STATUS_TO,
  EVENT_STEP_RETRY_SCHEDULED,
  EVENT_TASK_TRANSITION,
} from '@sluice/telemetry';
import { startE2eStack, type E2eStack } from '../support/e2e-stack.js';
import { startFakeLlmServer, type FakeLlmServer } from '../support/fake-llm-server.js';
import { historyEntries } from '../support/history.js';
import {
  startOtlpReceiver,
  type OtlpReceiver,
  type ReceivedSpan,
} from '../support/otlp-receiver.js';
import { TRACE_RESOURCE } from './tracing-task-types.js';

const TASK_MODULE = path.join(
  path.dirname(fileURLToPath(import.meta.url)),
  'tracing-task-types.ts',
);
const LLM_KEY = 'sk-trace';
const MODEL = 'gpt-trace';
/** How long the spans of a finished task may take to arrive (batches leave every 200 ms). */
const ARRIVAL_MS = 15_000;

// ---- A flaky HTTP tool: the first request fails with a 500, the others succeed ------------------

interface FlakyTool {
  readonly url: string;
  /** The headers of each request, in order. */
  readonly requests: IncomingHttpHeaders[];
  stop(): Promise<void>;
}

async function startFlakyTool(): Promise<FlakyTool> {
  const requests: IncomingHttpHeaders[] = [];
  const server: Server = createServer((req, res) => {
    requests.push(req.headers);
    if (requests.length === 1) res.writeHead(500).end('try again');
    else res.writeHead(200, { 'content-type': 'text/plain' }).end('Queues absorb bursts of work.');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  assert.ok(address && typeof address === 'object');
  return {
    url: `http://127.0.0.1:${address.port}/page`,
    requests,
    async stop() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

// ---- The run -----------------------------------------------------------------------------------

let receiver: OtlpReceiver;
let tool: FlakyTool;
let llm: FakeLlmServer;
let e2e: E2eStack;
let taskId: string;
let traceId: string;
let history: TaskEvent[];

before(async () => {
  receiver = await startOtlpReceiver();
  tool = await startFlakyTool();
  llm = await startFakeLlmServer({ apiKey: LLM_KEY });
  e2e = await startE2eStack({
    label: 'tracing',
    resources: ['llm', TRACE_RESOURCE],
    llmBaseUrl: llm.baseUrl,
    llmApiKey: LLM_KEY,
    env: {
      SLUICE_TASK_MODULES: TASK_MODULE,
      SLUICE_SCHEDULER_POLL_MS: '100',
      SLUICE_LLM_MODEL: MODEL,
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
      OTEL_BSP_SCHEDULE_DELAY: '200',
      OTEL_TRACES_SAMPLER: 'always_on',
    },
  });

  const { task } = await e2e.client.createTask({
    type: 'tr-traced',
    priority: 'PRIORITY_P1',
    input: { url: tool.url },
  });
  taskId = task.task_id;
  // The whole history, approving when asked; the stream ends when the task is final.
  history = [];
  for await (const event of e2e.client.watchTask(taskId, 0, AbortSignal.timeout(60_000))) {
    history.push(event);
    if (event.to_status === 'TASK_STATUS_WAITING_APPROVAL') {
      await e2e.client.approveTask(taskId, { approved: true, comment: 'go on' });
    }
  }
  const { task: done } = await e2e.client.getTask(taskId);
  assert.equal(done.status, 'TASK_STATUS_SUCCEEDED', `the task ended ${done.status}`);
  traceId = done.trace_id;
});

after(async () => {
  await e2e?.stop();
  await llm?.stop();
  await tool?.stop();
  await receiver?.stop();
});

// ---- Reading the tree --------------------------------------------------------------------------

const STEP_SPAN = /^sluice\.step (\w+)$/;

/** The step spans of the task: `sluice.step <name>` carrying its id. */
function stepSpans(spans: readonly ReceivedSpan[], step?: string): ReceivedSpan[] {
  return spans.filter(
    (s) =>
      s.attributes[ATTR_TASK_ID] === taskId &&
      STEP_SPAN.test(s.name) &&
      (step === undefined || s.attributes[ATTR_STEP] === step),
  );
}

/** Whether the task's four step attempts (fetch twice, ask, summarize) have arrived. */
const allStepsArrived = (spans: readonly ReceivedSpan[]) =>
  stepSpans(spans, 'fetch').length >= 2 &&
  stepSpans(spans, 'ask').length >= 1 &&
  stepSpans(spans, 'summarize').length >= 1;

/** Waits until `predicate` holds of the received spans; returns the spans of the task's trace. */
async function traceWhere(
  predicate: (spans: readonly ReceivedSpan[]) => boolean,
): Promise<ReceivedSpan[]> {
  const spans = await receiver.waitFor((all) => allStepsArrived(all) && predicate(all), ARRIVAL_MS);
  return spans.filter((s) => s.traceId === traceId);
}

function byId(spans: readonly ReceivedSpan[]): Map<string, ReceivedSpan> {
  return new Map(spans.map((s) => [s.spanId, s]));
}

const childrenOf = (spans: readonly ReceivedSpan[], parent: ReceivedSpan) =>
  spans.filter((s) => s.parentSpanId === parent.spanId);

/** The span's ancestors, nearest first, as far as they arrived. */
function ancestors(spans: readonly ReceivedSpan[], span: ReceivedSpan): ReceivedSpan[] {
  const index = byId(spans);
  const chain: ReceivedSpan[] = [];
  for (let at = span.parentSpanId; at !== undefined;) {
    const parent = index.get(at);
    if (parent === undefined) break;
    chain.push(parent);
    at = parent.parentSpanId;
  }
  return chain;
}

const isCreateRoot = (s: ReceivedSpan) =>
  s.serviceName === 'sluice-gateway' &&
  s.kind === 'server' &&
  s.name === 'sluice.v1.TaskService/CreateTask' &&
  s.parentSpanId === undefined;

const isDispatch = (s: ReceivedSpan) =>
  /scheduler/.test(s.serviceName ?? '') &&
  s.kind === 'producer' &&
  s.attributes['messaging.operation.type'] === 'send';

const attemptOf = (s: ReceivedSpan) => Number(s.attributes[ATTR_STEP_ATTEMPT]);

const describeSpan = (s: ReceivedSpan) =>
  `${s.serviceName ?? '?'}: ${s.name} (${s.kind}, parent ${s.parentSpanId ?? 'none'})`;

// ---- What the trace shows ----------------------------------------------------------------------

describe('the trace of a task', () => {
  it('is one trace, the one GetTask reports, for every span of the task', async () => {
    assert.match(traceId, /^[0-9a-f]{32}$/);
    const spans = await receiver.waitFor(allStepsArrived, ARRIVAL_MS);
    const ofTask = spans.filter((s) => s.attributes[ATTR_TASK_ID] === taskId);
    // Other calls about the task (GetTask, ApproveTask, WatchTask) are their callers' traces.
    const work = ofTask.filter((s) => !(s.serviceName === 'sluice-gateway' && s.kind === 'server'));
    assert.ok(work.length >= 4);
    assert.deepEqual(
      work.filter((s) => s.traceId !== traceId).map(describeSpan),
      [],
      'spans of the task outside its trace',
    );
    assert.deepEqual(receiver.errors, [], 'every export was well-formed OTLP');
  });

  it('has spans from the gateway, the scheduler and both executors', async () => {
    const services = (spans: readonly ReceivedSpan[]) =>
      new Set(spans.filter((s) => s.traceId === traceId).map((s) => s.serviceName));
    const expected = [
      'sluice-gateway',
      'sluice-scheduler',
      `sluice-executor-${TRACE_RESOURCE}`,
      'sluice-executor-llm',
    ];
    const spans = await traceWhere((all) => {
      const seen = services(all);
      return expected.every((name) => seen.has(name));
    }).catch(() => receiver.spans.filter((s) => s.traceId === traceId));
    assert.deepEqual([...services(spans)].sort(), [...expected].sort());
  });

  it('has the CreateTask call as its root, dispatches under it and each step under its dispatch', async () => {
    const spans = await traceWhere((all) => {
      const trace = all.filter((s) => s.traceId === traceId);
      return (
        trace.some(isCreateRoot) &&
        stepSpans(trace).every((step) => ancestors(trace, step).some(isCreateRoot))
      );
    }).catch(() => receiver.spans.filter((s) => s.traceId === traceId));
    const roots = spans.filter((s) => s.parentSpanId === undefined);
    assert.deepEqual(roots.map(describeSpan), [
      'sluice-gateway: sluice.v1.TaskService/CreateTask (server, parent none)',
    ]);
    const steps = stepSpans(spans);
    assert.equal(steps.length, 4, `step attempts: ${steps.map(describeSpan).join('; ')}`);
    const index = byId(spans);
    const dispatches = new Set<string>();
    for (const step of steps) {
      const parent = step.parentSpanId === undefined ? undefined : index.get(step.parentSpanId);
      assert.ok(
        parent && isDispatch(parent),
        `${describeSpan(step)} is not a child of a dispatch (${parent ? describeSpan(parent) : 'parent not received'})`,
      );
      assert.equal(parent.attributes['messaging.system'], 'nats');
      dispatches.add(parent.spanId);
      assert.ok(
        ancestors(spans, parent).some(isCreateRoot),
        `the dispatch ${describeSpan(parent)} is not under CreateTask`,
      );
    }
    assert.equal(dispatches.size, 4, 'each attempt has a dispatch of its own');
  });

  it('shows the retry: two attempts of fetch, the first failed, and the retry event', async () => {
    const spans = await traceWhere((all) =>
      all.some((s) => s.events.some((e) => e.name === EVENT_STEP_RETRY_SCHEDULED)),
    ).catch(() => receiver.spans.filter((s) => s.traceId === traceId));
    const attempts = stepSpans(spans, 'fetch').sort((a, b) => attemptOf(a) - attemptOf(b));
    assert.deepEqual(
      attempts.map((s) => [attemptOf(s), s.status.code]),
      [
        [1, 'error'],
        [2, 'unset'],
      ],
    );
    assert.match(attempts[0]?.status.message ?? '', /HTTP 500/);
    for (const step of ['ask', 'summarize']) {
      assert.deepEqual(
        stepSpans(spans, step).map((s) => s.status.code),
        ['unset'],
        `${step} ran once`,
      );
    }
    // The executor applies nothing on failure; the scheduler records the retry in the trace.
    const retries = spans.flatMap((s) =>
      s.events.filter((e) => e.name === EVENT_STEP_RETRY_SCHEDULED).map((e) => e.attributes),
    );
    assert.equal(retries.length, 1, 'one retry scheduled');
    assert.equal(retries[0]?.[ATTR_STEP], 'fetch');
    assert.equal(retries[0]?.[ATTR_STEP_ATTEMPT], 1);
  });

  it('has the HTTP calls of the steps as client spans under them', async () => {
    const spans = await traceWhere((all) => {
      const trace = all.filter((s) => s.traceId === traceId);
      return (
        stepSpans(trace, 'fetch').every((step) => childrenOf(trace, step).length > 0) &&
        trace.some((s) => s.name === `chat ${MODEL}` && childrenOf(trace, s).length > 0)
      );
    });
    // Each attempt of fetch: one GET of the tool, answered 500 then 200.
    const attempts = stepSpans(spans, 'fetch').sort((a, b) => attemptOf(a) - attemptOf(b));
    const calls = attempts.map((step) => childrenOf(spans, step));
    assert.deepEqual(
      calls.map((children) =>
        children.map((c) => ({
          name: c.name,
          kind: c.kind,
          method: c.attributes['http.request.method'],
          url: c.attributes['url.full'],
          server: c.attributes['server.address'],
          status: c.attributes['http.response.status_code'],
          code: c.status.code,
        })),
      ),
      [500, 200].map((status) => [
        {
          name: 'GET',
          kind: 'client',
          method: 'GET',
          url: tool.url,
          server: '127.0.0.1',
          status,
          code: status === 500 ? 'error' : 'unset',
        },
      ]),
    );
    // The tool got each request's own span as its parent, so it could continue the trace.
    assert.deepEqual(
      tool.requests.map((headers) => headers.traceparent),
      calls.map((children) => `00-${traceId}-${children[0]?.spanId}-01`),
    );

    // summarize: a GenAI chat span, with the POST to the LLM under it.
    const [summarize] = stepSpans(spans, 'summarize');
    assert.ok(summarize);
    const chats = childrenOf(spans, summarize);
    assert.deepEqual(
      chats.map((s) => [s.name, s.kind]),
      [[`chat ${MODEL}`, 'client']],
    );
    const chat = chats[0];
    assert.ok(chat);
    assert.equal(chat.serviceName, 'sluice-executor-llm');
    assert.equal(chat.attributes['gen_ai.operation.name'], 'chat');
    assert.equal(chat.attributes['gen_ai.provider.name'], 'openai');
    assert.equal(chat.attributes['gen_ai.request.model'], MODEL);
    assert.equal(chat.attributes['gen_ai.response.model'], MODEL);
    assert.equal(typeof chat.attributes['gen_ai.usage.input_tokens'], 'number');
    assert.equal(typeof chat.attributes['gen_ai.usage.output_tokens'], 'number');
    const posts = childrenOf(spans, chat);
    assert.deepEqual(
      posts.map((s) => [
        s.name,
        s.kind,
        s.attributes['url.full'],
        s.attributes['http.response.status_code'],
      ]),
      [['POST', 'client', `${llm.baseUrl}/chat/completions`, 200]],
    );
    // The approval step calls nothing.
    const [ask] = stepSpans(spans, 'ask');
    assert.ok(ask);
    assert.deepEqual(childrenOf(spans, ask), []);
  });

  it('has the database work of the task as client spans under CreateTask and the dispatches', async () => {
    const isDatabase = (s: ReceivedSpan) =>
      s.kind === 'client' && s.attributes['db.system.name'] === 'postgresql';
    const url = new URL(e2e.database.url);
    const server = {
      'db.system.name': 'postgresql',
      'db.namespace': e2e.database.name,
      'server.address': url.hostname,
      'server.port': url.port === '' ? 5432 : Number(url.port),
    };
    /** The conventions' attributes of a database span, and its name. */
    const conventions = (s: ReceivedSpan) => ({
      name: s.name,
      'db.system.name': s.attributes['db.system.name'],
      'db.namespace': s.attributes['db.namespace'],
      'server.address': s.attributes['server.address'],
      'server.port': s.attributes['server.port'],
      'db.query.summary': s.attributes['db.query.summary'],
    });
    const spans = await traceWhere((all) => {
      const trace = all.filter((s) => s.traceId === traceId);
      const dispatches = trace.filter(isDispatch);
      return (
        dispatches.length >= 4 &&
        dispatches.every((d) => childrenOf(trace, d).filter(isDatabase).length >= 2) &&
        trace.some((s) => s.name === 'sluice.task.create' && childrenOf(trace, s).some(isDatabase))
      );
    }).catch(() => receiver.spans.filter((s) => s.traceId === traceId));
    const index = byId(spans);

    // The gateway: the create transaction, under the task's create span.
    const creates = spans.filter((s) => isDatabase(s) && s.serviceName === 'sluice-gateway');
    assert.equal(
      creates.length,
      1,
      `gateway database spans: ${creates.map(describeSpan).join('; ')}`,
    );
    const [create] = creates;
    assert.ok(create);
    assert.equal(index.get(create.parentSpanId ?? '')?.name, 'sluice.task.create');
    assert.match(
      create.name,
      /^INSERT tasks INSERT task_events INSERT task_event_outbox INSERT task_steps( SELECT idempotency_tombstones)?$/,
    );
    assert.deepEqual(conventions(create), {
      name: create.name,
      ...server,
      'db.query.summary': create.name,
    });
    assert.equal(create.status.code, 'unset');

    // Each executor: the start and the outcome of each attempt, under the dispatch that delivered
    // it (the step span's parent), so in the task's trace.
    const steps = stepSpans(spans);
    assert.equal(steps.length, 4);
    for (const step of steps) {
      const dispatch = index.get(step.parentSpanId ?? '');
      assert.ok(dispatch && isDispatch(dispatch), describeSpan(step));
      const work = childrenOf(spans, dispatch).filter(isDatabase);
      assert.deepEqual(
        work.map((s) => [s.serviceName, s.name]).sort(),
        [
          // The outcome write, then the start (sorted by name).
          [
            step.serviceName,
            'SELECT tasks UPDATE task_steps INSERT task_steps UPDATE tasks INSERT task_events ' +
              'INSERT task_event_outbox',
          ],
          [
            step.serviceName,
            'SELECT tasks UPDATE task_steps UPDATE tasks INSERT task_events INSERT task_event_outbox ' +
              'SELECT task_steps SELECT task_events',
          ],
        ],
        `database spans of ${describeSpan(step)}`,
      );
      for (const span of work) {
        assert.deepEqual(conventions(span), {
          name: span.name,
          ...server,
          'db.query.summary': span.name,
        });
      }
      const record = work.find((s) => s.name.includes('INSERT task_steps'));
      // Several tables: no single operation or collection to name.
      assert.equal(record?.attributes['db.collection.name'], undefined);
      // The outcome is recorded once the attempt ended.
      assert.ok((record?.startTimeUnixNano ?? 0n) >= step.endTimeUnixNano, describeSpan(step));
    }

    // Nothing of a statement's text or values, nor the database's credentials.
    for (const span of spans.filter(isDatabase)) {
      assert.equal(span.attributes['db.query.text'], undefined);
      assert.equal(span.attributes['db.user'], undefined);
      assert.ok(!JSON.stringify(span.attributes).includes(taskId), describeSpan(span));
    }

    // The scheduler's claims serve many tasks: each is a trace of its own, with the count.
    const claims = receiver.spans.filter(
      (s) => isDatabase(s) && /scheduler/.test(s.serviceName ?? ''),
    );
    assert.ok(claims.length >= 1, 'the claims of the dispatches were recorded');
    for (const claim of claims) {
      assert.equal(claim.name, 'SELECT task_steps UPDATE task_steps');
      assert.equal(claim.parentSpanId, undefined);
      assert.notEqual(claim.traceId, traceId);
      assert.ok(Number(claim.attributes['sluice.claimed']) >= 1, describeSpan(claim));
    }
  });

  it('records every state change of the task as a span event, in order', async () => {
    const expected = historyEntries(history).map(
      (h) => `${JSON.stringify(h.event.type)}→${JSON.stringify(h.toStatus)}`,
    );
    const transitions = (spans: readonly ReceivedSpan[]) =>
      spans
        .filter((s) => s.traceId === traceId)
        .flatMap((s) => s.events.filter((e) => e.name === EVENT_TASK_TRANSITION))
        .sort((a, b) => (a.timeUnixNano < b.timeUnixNano ? -1 : 1))
        .map(
          (e) =>
            `${JSON.stringify(e.attributes[ATTR_TASK_EVENT])}→${JSON.stringify(e.attributes[ATTR_TASK_STATUS_TO])}`,
        );
    const spans = await traceWhere((all) => transitions(all).length >= expected.length).catch(
      () => receiver.spans,
    );
    // create, start, fail_retryable, backoff_due, start, continue, await_approval, approve, …
    assert.ok(expected.includes('"fail_retryable"→"failed_retryable"'), expected.join(', '));
    assert.ok(expected.includes('"await_approval"→"waiting_approval"'), expected.join(', '));
    assert.deepEqual(transitions(spans), expected);
    // The last step's success completed the task in the executor's outcome write, so the executor
    // recorded that transition (decisions.md: the usual completion).
    const completion = spans.find(
      (s) =>
        s.traceId === traceId &&
        s.events.some(
          (e) => e.name === EVENT_TASK_TRANSITION && e.attributes[ATTR_TASK_EVENT] === 'complete',
        ),
    );
    assert.equal(completion?.name, 'sluice.executor.complete_task');
  });
});
