/**
 * The step runner against the real Postgres, with a message and a connection that only count what
 * is done to them: what a Postgres outage during a step's outcome write does to the step.
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { JsMsg } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { z } from 'zod';
import { createBusCatalog, type StepDispatch } from '@sluice/bus';
import {
  GroupWriter,
  findStep,
  recordStepOutcomes,
  startUsualSteps,
  type DatabaseHandle,
  type OutcomeToRecord,
  type StepDispatchRef,
} from '@sluice/db';
import { createQueuedTasks, openTaskTypeDatabase, type TaskTypeDatabase } from '@sluice/db/testing';
import { complete, defineTask } from '@sluice/sdk';
import { createLogger, createMetrics, type Logger } from '@sluice/telemetry';
import { createLlmGate } from './llm-gate.js';
import { RunningSteps, runDispatchedStep, type StepRunnerDeps } from './step-runner.js';
import { createTaskRegistry, manifestOf } from './task-registry.js';

const ACK_WAIT_MS = 1_000;

let handlerRuns = 0;
const definition = defineTask({
  name: 'runner-once',
  version: 1,
  input: z.object({}),
  firstStep: 'only',
  steps: { only: { resource: 'llm' } },
  handlers: {
    only() {
      handlerRuns += 1;
      return Promise.resolve(complete({ done: true }));
    },
  },
});
const manifest = manifestOf(definition);

/** What the throwing task's handler throws. */
let thrown: unknown;
const throwing = defineTask({
  name: 'runner-throws',
  version: 1,
  input: z.object({}),
  firstStep: 'only',
  steps: { only: { resource: 'llm', maxAttempts: 1 } },
  handlers: {
    only() {
      handlerRuns += 1;
      // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- any value, on purpose
      return Promise.reject(thrown);
    },
  },
});
const throwingManifest = manifestOf(throwing);

/** What the returning task's handler returns. */
let returned: unknown;
const returning = defineTask({
  name: 'runner-returns',
  version: 1,
  input: z.object({}),
  firstStep: 'only',
  steps: { only: { resource: 'llm', maxAttempts: 1 } },
  handlers: {
    only() {
      handlerRuns += 1;
      return Promise.resolve(returned as ReturnType<typeof complete>);
    },
  },
});
const returningManifest = manifestOf(returning);

/**
 * Lets the deaf handlers return (only at their test's end, so that a runner that waits for them
 * fails its assertion instead of hanging the file).
 */
let releaseDeaf: () => void = () => {};

/** A handler that does not return when its signal aborts, only when its test releases it. */
const deaf = defineTask({
  name: 'runner-deaf',
  version: 1,
  input: z.object({}),
  firstStep: 'only',
  steps: { only: { resource: 'llm', timeoutMs: 200, maxAttempts: 1 } },
  handlers: {
    only() {
      handlerRuns += 1;
      return new Promise((resolve) => {
        const previous = releaseDeaf;
        releaseDeaf = () => {
          previous();
          resolve(complete({ late: true }));
        };
      });
    },
  },
});
const deafManifest = manifestOf(deaf);

/** A step that calls the LLM (an endpoint that never answers, in its tests) until its timeout. */
const calling = defineTask({
  name: 'runner-calls-llm',
  version: 1,
  input: z.object({}),
  firstStep: 'only',
  steps: { only: { resource: 'llm', timeoutMs: 1_000, maxAttempts: 1 } },
  handlers: {
    async only(ctx) {
      await ctx.llm.chat({ messages: [{ role: 'user', content: 'never answered' }] });
      return complete({ answered: true });
    },
  },
});
const callingManifest = manifestOf(calling);

/** Resolved by the test's endpoint once the leaving task's LLM call reached it. */
let llmCallArrived: Promise<void> = Promise.resolve();
/** A step that returns while an LLM call it started is still out (as the loser of a race is). */
const leaving = defineTask({
  name: 'runner-leaves-llm-call',
  version: 1,
  input: z.object({}),
  firstStep: 'only',
  steps: { only: { resource: 'llm', maxAttempts: 1 } },
  handlers: {
    async only(ctx) {
      ctx.llm.chat({ messages: [{ role: 'user', content: 'left behind' }] }).catch(() => {});
      await llmCallArrived;
      return complete({ left: true });
    },
  },
});
const leavingManifest = manifestOf(leaving);

let fixture: TaskTypeDatabase;
let handle: DatabaseHandle;

before(async () => {
  fixture = await openTaskTypeDatabase({
    tenants: ['acme'],
    manifests: [manifest, throwingManifest],
    max: 4,
  });
  handle = fixture.handle;
});

after(async () => {
  await fixture?.close();
});

/** What was done to a step message. */
interface CountedMessage {
  readonly message: JsMsg;
  readonly settled: string[];
}

function countedMessage(seq: number): CountedMessage {
  const settled: string[] = [];
  const message = {
    seq,
    headers: undefined,
    ack: () => settled.push('ack'),
    nak: () => settled.push('nak'),
    term: () => settled.push('term'),
    working: () => {},
  } as unknown as JsMsg;
  return { message, settled };
}

/** Postgres gone for one write: what the `postgres` client rejects with then. */
function connectionLost(): Error {
  return Object.assign(new Error('write CONNECTION_CLOSED 127.0.0.1:5432'), {
    code: 'CONNECTION_CLOSED',
  });
}

function runnerDeps(failOutcomeWrites: number, log = silentLog()): StepRunnerDeps {
  let failures = failOutcomeWrites;
  const nc = { publish: () => {} } as unknown as NatsConnection;
  return {
    db: handle.db,
    nc,
    catalog: createBusCatalog('runner'),
    registry: createTaskRegistry([definition, throwing, deaf, returning, calling, leaving]),
    llm: { baseUrl: 'http://127.0.0.1:9/v1', apiKey: undefined, model: 'none' },
    log,
    metrics: createMetrics(),
    resource: 'llm',
    heartbeatMs: 100,
    ackWaitMs: ACK_WAIT_MS,
    running: new RunningSteps(),
    databaseOutage: { stopping: () => false, firstPauseMs: 1, maxPauseMs: 5 },
    starts: new GroupWriter((refs: StepDispatchRef[]) =>
      startUsualSteps(handle.db, refs, ACK_WAIT_MS),
    ),
    outcomes: new GroupWriter((items: OutcomeToRecord[]) => {
      if (failures > 0) {
        failures -= 1;
        return Promise.reject(connectionLost());
      }
      return recordStepOutcomes(handle.db, items);
    }),
  };
}

function silentLog(): Logger {
  return createLogger({ service: 'executor-test', level: 'silent' });
}

/** A step of a new task, claimed and published as the scheduler leaves it. */
async function dispatchedStep(ofManifest = manifest): Promise<StepDispatch> {
  const [taskId] = await createQueuedTasks(handle.db, 'acme', ofManifest, 1);
  assert.ok(taskId);
  await handle.db.$client`
    update task_steps set status = 'dispatched', dispatch_count = 1 where task_id = ${taskId}`;
  return {
    type: 'step.dispatch',
    task_id: taskId,
    step_seq: 1,
    dispatch: 1,
    tenant_id: 'acme',
    priority: 2,
    resource: 'llm',
  };
}

/** An error whose `field` cannot be read: its getter throws. */
function withThrowingGetter(field: string): Error {
  const error = new Error('the message');
  Object.defineProperty(error, field, {
    get() {
      throw new Error(`${field} cannot be read`);
    },
  });
  return error;
}

describe('runDispatchedStep', () => {
  it('records the outcome after Postgres comes back, without running the handler again', async () => {
    const [taskId] = await createQueuedTasks(handle.db, 'acme', manifest, 1);
    assert.ok(taskId);
    // Claimed and published, as the scheduler leaves it.
    await handle.db.$client`
      update task_steps set status = 'dispatched', dispatch_count = 1 where task_id = ${taskId}`;
    handlerRuns = 0;
    const deps = runnerDeps(1);
    const dispatch: StepDispatch = {
      type: 'step.dispatch',
      task_id: taskId,
      step_seq: 1,
      dispatch: 1,
      tenant_id: 'acme',
      priority: 2,
      resource: 'llm',
    };
    const { message, settled } = countedMessage(7);
    await runDispatchedStep(deps, message, dispatch);
    const step = await findStep(handle.db, taskId, 1);
    assert.deepEqual(
      { handlerRuns, settled, status: step?.status },
      { handlerRuns: 1, settled: ['ack'], status: 'succeeded' },
      'the outcome the handler returned is recorded once Postgres answers, and the message acked',
    );
  });

  // What a handler throws is a value of any shape: one that cannot be turned into text, or whose
  // fields (or pino's view of them) throw when read. The old classification and its log line threw
  // in turn, so the run rejected: the message was handed back with the step left running, and the
  // handler ran again on every redelivery once its heartbeat went stale.
  const oddValues: Array<[string, () => unknown]> = [
    ['an object without a prototype', (): unknown => Object.create(null) as unknown],
    [
      'an object whose toString throws',
      () => ({
        toString: () => {
          throw new Error('no');
        },
      }),
    ],
    ['an error whose message getter throws', () => withThrowingGetter('message')],
    ['an error whose name getter throws', () => withThrowingGetter('name')],
    ['an error whose status getter throws', () => withThrowingGetter('status')],
    [
      'an error whose stack getter throws (read by the log line)',
      () => withThrowingGetter('stack'),
    ],
    ['an error whose message is not a string', () => Object.assign(new Error(), { message: 42 })],
  ];
  for (const [name, make] of oddValues) {
    it(`records the failure of a handler that throws ${name}`, async () => {
      const dispatch = await dispatchedStep(throwingManifest);
      handlerRuns = 0;
      thrown = make();
      // A logger that writes, so the line's serialization of the error runs.
      const log = createLogger({
        service: 'executor-test',
        level: 'warn',
        destination: { write: () => {} },
      });
      const { message, settled } = countedMessage(8);
      await runDispatchedStep(runnerDeps(0, log), message, dispatch);
      const step = await findStep(handle.db, dispatch.task_id, 1);
      const outcome = step?.outcome;
      assert.equal(outcome?.type, 'failed');
      assert.deepEqual(
        { handlerRuns, settled, status: step?.status, errorClass: outcome.error.errorClass },
        { handlerRuns: 1, settled: ['ack'], status: 'failed', errorClass: 'unknown' },
      );
      assert.ok(outcome.error.message.length > 0, 'the failure says something');
    });
  }

  it('fails a step whose handler ignores its timeout once the grace after the abort is over', async () => {
    const dispatch = await dispatchedStep(deafManifest);
    handlerRuns = 0;
    const { message, settled } = countedMessage(9);
    let runEnded = false;
    const run = runDispatchedStep({ ...runnerDeps(0), abortGraceMs: 300 }, message, dispatch).then(
      () => void (runEnded = true),
    );
    // The old runner waited for the handler for ever: the step stayed running (its heartbeat kept
    // it from the reconciler) and the task never failed.
    await waitUntil(
      () => settled.length > 0,
      'the message settled after the timeout and its grace',
    );
    // The run (what holds the executor's slot) lasts as long as the handler does.
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(runEnded, false, 'the slot stays taken while the handler runs on');
    releaseDeaf();
    await run;
    const step = await findStep(handle.db, dispatch.task_id, 1);
    const outcome = step?.outcome;
    assert.equal(outcome?.type, 'failed');
    assert.deepEqual(
      { handlerRuns, settled, status: step?.status, errorClass: outcome.error.errorClass },
      { handlerRuns: 1, settled: ['ack'], status: 'failed', errorClass: 'tool_timeout' },
    );
    assert.match(outcome.error.message, /did not stop/);
  });

  it('records a cancel of a step whose handler ignores it once the grace is over', async () => {
    const dispatch = await dispatchedStep(deafManifest);
    const deps = { ...runnerDeps(0), abortGraceMs: 300 };
    const { message, settled } = countedMessage(10);
    handlerRuns = 0;
    const run = runDispatchedStep(deps, message, dispatch);
    // Cancelled once its handler runs (within the step's 200 ms timeout): a fixed pause before the
    // cancel found the step not started yet on a loaded machine.
    await waitUntil(() => handlerRuns === 1, 'the handler runs');
    assert.equal(deps.running.cancel(dispatch.task_id), 1);
    await waitUntil(() => settled.length > 0, 'the message settled after the cancel and its grace');
    releaseDeaf();
    await run;
    const step = await findStep(handle.db, dispatch.task_id, 1);
    assert.deepEqual(
      { settled, outcome: step?.outcome },
      { settled: ['ack'], outcome: { type: 'cancelled' } },
    );
  });

  // The step's abort reaches its LLM call typed: the gate takes a timeout as a drop and lowers its
  // limit, and a cancel as neither a success nor a failure. Before, the runner aborted with a bare
  // Error and both counted as a plain failure, the limit unmoved by a timeout.
  for (const why of ['timeout', 'cancel'] as const) {
    it(`an LLM call cut by the step's ${why} is a ${why === 'timeout' ? 'drop' : 'cancel'} for the LLM gate`, async () => {
      let requests = 0;
      const endpoint = createServer(() => void (requests += 1)); // never answers
      await new Promise<void>((resolve) => endpoint.listen(0, '127.0.0.1', resolve));
      const gate = createLlmGate({
        minConcurrency: 1,
        maxConcurrency: 8,
        initialConcurrency: 4,
        backoffRatio: 0.5,
      });
      try {
        const dispatch = await dispatchedStep(callingManifest);
        const port = (endpoint.address() as AddressInfo).port;
        const deps: StepRunnerDeps = {
          ...runnerDeps(0),
          llm: { baseUrl: `http://127.0.0.1:${port}/v1`, apiKey: undefined, model: 'none' },
          llmGate: gate,
        };
        const { message, settled } = countedMessage(13);
        const run = runDispatchedStep(deps, message, dispatch);
        if (why === 'cancel') {
          await waitUntil(() => requests === 1, 'the LLM call went out');
          assert.equal(deps.running.cancel(dispatch.task_id), 1);
        }
        await run;
        const step = await findStep(handle.db, dispatch.task_id, 1);
        const snapshot = gate.snapshot();
        assert.deepEqual(
          {
            settled,
            outcome: step?.outcome?.type,
            limit: snapshot.limit,
            failed: snapshot.failed,
            cancelled: snapshot.cancelled,
          },
          why === 'timeout'
            ? // One call in flight when it started: the limit comes down from 1, to its minimum.
              { settled: ['ack'], outcome: 'failed', limit: 1, failed: 1, cancelled: 0 }
            : { settled: ['ack'], outcome: 'cancelled', limit: 4, failed: 0, cancelled: 1 },
        );
      } finally {
        gate.close();
        endpoint.closeAllConnections();
        await new Promise<void>((resolve) => endpoint.close(() => resolve()));
      }
    });
  }

  it('stops an LLM call its handler left running once the step is over, freeing its permit', async () => {
    // The step's signal was aborted only by a timeout or a cancel: a call the handler did not
    // await went on after the step, with no deadline at all, and held its LLM gate permit for as
    // long as the provider took (for ever from one that hangs), lowering the executor's limit.
    let arrived: () => void = () => {};
    llmCallArrived = new Promise((resolve) => (arrived = resolve));
    const endpoint = createServer(() => arrived()); // never answers
    await new Promise<void>((resolve) => endpoint.listen(0, '127.0.0.1', resolve));
    const gate = createLlmGate({
      minConcurrency: 1,
      maxConcurrency: 8,
      initialConcurrency: 4,
      backoffRatio: 0.5,
    });
    try {
      const dispatch = await dispatchedStep(leavingManifest);
      const port = (endpoint.address() as AddressInfo).port;
      const deps: StepRunnerDeps = {
        ...runnerDeps(0),
        llm: { baseUrl: `http://127.0.0.1:${port}/v1`, apiKey: undefined, model: 'none' },
        llmGate: gate,
      };
      const { message, settled } = countedMessage(14);
      await runDispatchedStep(deps, message, dispatch);
      const step = await findStep(handle.db, dispatch.task_id, 1);
      assert.deepEqual(
        { settled, outcome: step?.outcome?.type },
        { settled: ['ack'], outcome: 'complete' },
      );
      await waitUntil(() => gate.snapshot().inFlight === 0, 'the left call gave its permit back');
      // Stopped because nobody wants it any more: neither a failure nor a drop.
      assert.deepEqual(
        {
          cancelled: gate.snapshot().cancelled,
          failed: gate.snapshot().failed,
          limit: gate.snapshot().limit,
        },
        { cancelled: 1, failed: 0, limit: 4 },
      );
    } finally {
      gate.close();
      endpoint.closeAllConnections();
      await new Promise<void>((resolve) => endpoint.close(() => resolve()));
    }
  });

  it('keeps 2,000 characters of the message of a result Sluice refuses, as of a thrown error', async () => {
    const dispatch = await dispatchedStep(returningManifest);
    // The refusal quotes the result's type; an output schema's issue can quote a long value too.
    returned = { type: `${'x'.repeat(100_000)}\u{1F600}` };
    const { message, settled } = countedMessage(11);
    await runDispatchedStep(runnerDeps(0), message, dispatch);
    const step = await findStep(handle.db, dispatch.task_id, 1);
    const outcome = step?.outcome;
    assert.equal(outcome?.type, 'failed');
    assert.deepEqual(
      { settled, errorClass: outcome.error.errorClass },
      { settled: ['ack'], errorClass: 'schema_validation' },
    );
    assert.match(outcome.error.message, /^step only returned an object of type "xxx/);
    assert.ok(
      outcome.error.message.length <= 2_000,
      `a message of ${outcome.error.message.length} characters`,
    );
  });

  it('fails a step of a type version this executor does not know as retryable', async () => {
    // In a rolling deployment the newest executor registers version 2 and new tasks pin it, while
    // the older executors of the same resource still receive their steps. Failed for good, such a
    // task ended on whichever executor took it first; retried, another executor can run it (and
    // when none can, its attempts end in a dead letter that can be redriven after the deploy).
    const dispatch = await dispatchedStep(throwingManifest);
    const deps = { ...runnerDeps(0), registry: createTaskRegistry([definition]) };
    const { message, settled } = countedMessage(12);
    await runDispatchedStep(deps, message, dispatch);
    const step = await findStep(handle.db, dispatch.task_id, 1);
    const outcome = step?.outcome;
    assert.equal(outcome?.type, 'failed');
    assert.deepEqual(
      { settled, error: outcome.error },
      {
        settled: ['ack'],
        error: {
          errorClass: 'unknown',
          message: 'this executor has no definition of runner-throws v1 step only',
          retryable: true,
        },
      },
    );
  });
  it('runs a step whose start committed though its answer was lost, once, at its first attempt', async () => {
    // The start is tried again and finds the step running under this very dispatch: its own start.
    // The old runner took it for another executor's ('busy') and handed the message back; the step
    // ran only once its heartbeat went stale, an ack wait later, with a second attempt counted.
    const dispatch = await dispatchedStep();
    handlerRuns = 0;
    let answersLost = 1;
    const deps: StepRunnerDeps = {
      ...runnerDeps(0),
      starts: new GroupWriter(async (refs: StepDispatchRef[]) => {
        const started = await startUsualSteps(handle.db, refs, ACK_WAIT_MS);
        if (answersLost > 0) {
          answersLost -= 1;
          throw connectionLost();
        }
        return started;
      }),
    };
    const { message, settled } = countedMessage(14);
    await runDispatchedStep(deps, message, dispatch);
    const step = await findStep(handle.db, dispatch.task_id, 1);
    assert.deepEqual(
      { handlerRuns, settled, status: step?.status, attempts: step?.attempts },
      { handlerRuns: 1, settled: ['ack'], status: 'succeeded', attempts: 1 },
    );
  });

  it('wakes the scheduler and the dispatcher when a retried outcome write finds its outcome recorded', async () => {
    // The COMMIT applied, but its answer was lost with the connection: the write is tried again and
    // finds the outcome recorded (stale). It may be this very outcome, which waits for the outcome
    // pass (a failure) or added steps (a continuation): the old runner woke no one for a stale write,
    // so it waited for the scheduler's next poll.
    const dispatch = await dispatchedStep(throwingManifest);
    thrown = new Error('the tool failed');
    const published: Array<{ subject: string; message: unknown }> = [];
    const nc = {
      publish: (subject: string, data: Uint8Array) =>
        published.push({ subject, message: JSON.parse(new TextDecoder().decode(data)) }),
    } as unknown as NatsConnection;
    let answersLost = 1;
    const deps: StepRunnerDeps = {
      ...runnerDeps(0),
      nc,
      outcomes: new GroupWriter(async (items: OutcomeToRecord[]) => {
        const recordings = await recordStepOutcomes(handle.db, items);
        if (answersLost > 0) {
          answersLost -= 1;
          throw connectionLost();
        }
        return recordings;
      }),
    };
    const { message, settled } = countedMessage(13);
    await runDispatchedStep(deps, message, dispatch);
    const step = await findStep(handle.db, dispatch.task_id, 1);
    assert.deepEqual(
      { settled, outcome: step?.outcome?.type },
      { settled: ['ack'], outcome: 'failed' },
    );
    assert.deepEqual(
      published
        .filter(({ subject }) => subject === deps.catalog.subjects.stepResult)
        .map(({ message }) => message),
      [{ type: 'step.result', task_id: dispatch.task_id, step_seq: 1 }],
      'the outcome pass is woken (the write may have recorded this outcome for it)',
    );
    assert.ok(
      published.some(({ subject }) => subject === deps.catalog.subjects.wake('dispatch')),
      'the dispatcher is woken (the write may have added steps)',
    );
  });
});

/** Waits until `condition` holds, failing after 5 s. */
async function waitUntil(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!condition()) {
    if (Date.now() > deadline) assert.fail(`timed out waiting: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
