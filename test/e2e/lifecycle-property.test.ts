/**
 * The live lifecycle property test: short seeded random sequences of create / cancel / pause /
 * resume / approve / reject / retry — and of the test's own moves: releasing the latch a running
 * step waits at, and holding the executor's only slot with another task so that a task stays
 * queued — against the real stack (gateway, scheduler, governor, executor as processes).
 *
 * A model (test/support/lifecycle-model.ts) predicts, for each command, whether the table allows
 * it and every state the task then passes through until it is settled. The test checks that
 * - a request the model refuses answers `FAILED_PRECONDITION` and changes nothing (same state,
 *   same last event), and an allowed one answers with a state on the predicted path;
 * - after each command, `WatchTask` shows the task moving only through predicted states until it
 *   reaches the settled one (pickup included: a queued task is waited for until its step runs at
 *   its latch), and `GetTask` then shows what the model says (flags, attempt, approval, step,
 *   whether it can be cancelled), with every step started exactly as often as predicted;
 * - every recorded history is a path in the transition table, replayed in full at the end and
 *   equal to what the incremental watches saw.
 *
 * Reproduce a failure with the seed it prints:
 *   SLUICE_PROPERTY_SEED=<seed> SLUICE_PROPERTY_RUNS=1 node --import tsx --test test/e2e/lifecycle-property.test.ts
 * `SLUICE_PROPERTY_SEED` sets the seed of the first sequence (the others follow it), and
 * `SLUICE_PROPERTY_RUNS` how many sequences run (default 25).
 */
import assert from 'node:assert/strict';
import { createHash, randomInt } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { status as grpcStatus } from '@grpc/grpc-js';
import type { Task, TaskEvent } from '@sluice/api';
import { NO_TASK, decideTransition, type HistoryEntry, type TaskMachineState } from '@sluice/core';
import { isServiceError, type TaskClient } from '@sluice/sdk/client';
import { startE2eStack, type E2eStack } from '../support/e2e-stack.js';
import { assertHistoryInTable, describeHistory, historyEntry } from '../support/history.js';
import {
  canCancel,
  created,
  describeState,
  isApplicable,
  isLifecycleCommand,
  predict,
  runningStep,
  settledState,
  showsApproval,
  type FlowStep,
  type LifecycleCommand,
  type ModelCommand,
  type ModelState,
} from '../support/lifecycle-model.js';
import { startLatchServer, type LatchServer } from '../support/latch-server.js';
import { PROP_FLOW_PROMPT } from './property-task-types.js';

const TASK_MODULE = path.join(
  path.dirname(fileURLToPath(import.meta.url)),
  'property-task-types.ts',
);

/** Sequences per run, and the seed of the first (the n-th uses seed + n). */
const RUNS = nonNegativeInteger('SLUICE_PROPERTY_RUNS', 25);
const FIRST_SEED = nonNegativeInteger('SLUICE_PROPERTY_SEED', randomInt(2 ** 31));
/** Commands after the create, per sequence. */
const MIN_COMMANDS = 8;
const MAX_COMMANDS = 12;
/** How long one command may take to settle before the test gives up on it. */
const SETTLE_TIMEOUT_MS = 15_000;
const PRIORITY = 'PRIORITY_P1';
/**
 * How often each request is picked when the table allows it (a fifth of that when it does not):
 * a cancel is allowed nearly always and would otherwise keep the task from getting far.
 */
const ALLOWED_WEIGHTS: ReadonlyArray<readonly [LifecycleCommand, number]> = [
  ['cancel', 2],
  ['pause', 3],
  ['resume', 3],
  ['approve', 4],
  ['retry', 3],
  ['reject', 1.5],
];

/**
 * The rows of the transition table the sequences can reach (all but the failure and approval
 * timeout rows), as `from event to`; which of them a run saw is printed at its end.
 */
const REACHABLE_ROWS = [
  '— create queued',
  'queued start running',
  'queued cancel cancelled',
  'queued pause paused',
  'running continue running',
  'running complete succeeded',
  'running await_approval waiting_approval',
  'running cancel running',
  'running cancel_completed cancelled',
  'running pause running',
  'running pause_completed paused',
  'waiting_approval approve running',
  'waiting_approval reject cancelled',
  'waiting_approval cancel cancelled',
  'paused resume queued',
  'paused resume waiting_approval',
  'paused cancel cancelled',
  'cancelled retry queued',
] as const;
/** How often each row was seen in this run's histories. */
const rowsSeen = new Map<string, number>();

let e2e: E2eStack;
let latch: LatchServer;
let client: TaskClient;

before(async () => {
  latch = await startLatchServer();
  // No step of these types calls an LLM: the default endpoint, where nothing answers, will do.
  e2e = await startE2eStack({
    label: 'lcprop',
    resources: ['tool:latch'],
    env: {
      SLUICE_TASK_MODULES: TASK_MODULE,
      SLUICE_TEST_LATCH_URL: latch.baseUrl,
      // One slot: a `prop-hold` task holding it keeps the task under test queued.
      SLUICE_EXECUTOR_SLOTS: '1',
      SLUICE_SCHEDULER_POLL_MS: '100',
      SLUICE_WATCH_RECHECK_MS: '200',
      SLUICE_ACK_WAIT_MS: '2000',
      SLUICE_HEARTBEAT_MS: '200',
    },
  });
  ({ client } = e2e);
});

after(async () => {
  const missing = REACHABLE_ROWS.filter((row) => !rowsSeen.has(row));
  console.log(
    `lifecycle property: seeds ${FIRST_SEED}…${FIRST_SEED + RUNS - 1}; table rows seen ` +
      `${REACHABLE_ROWS.length - missing.length}/${REACHABLE_ROWS.length}` +
      (missing.length > 0 ? `; never: ${missing.join(', ')}` : ''),
  );
  await e2e?.stop();
  await latch?.stop();
});

describe(`the task lifecycle follows the model (seeds ${FIRST_SEED}…${FIRST_SEED + RUNS - 1})`, () => {
  for (let run = 0; run < RUNS; run++) {
    const seed = FIRST_SEED + run;
    it(`sequence ${run + 1} of ${RUNS}, seed ${seed}`, () => new Sequence(seed).run());
  }
});

// ---- One sequence -------------------------------------------------------------------------------

/** A seeded random sequence of commands on one `prop-flow` task, checked against the model. */
class Sequence {
  private readonly random: () => number;
  /** What happened so far, printed when the sequence fails. */
  private readonly log: string[] = [];
  private state: ModelState | undefined;
  private taskId = '';
  private follower: HistoryFollower | undefined;
  /** The task as `GetTask` showed it when it was last settled. */
  private snapshot: Task | undefined;
  private blockerId: string | undefined;

  constructor(private readonly seed: number) {
    this.random = seededRandom(seed);
  }

  async run(): Promise<void> {
    try {
      await this.play();
    } catch (error) {
      await this.cleanUp();
      const message = error instanceof Error ? error.message : String(error);
      throw new Error(
        [
          `lifecycle property failed with seed ${this.seed}${this.taskId ? ` (task ${this.taskId})` : ''}:`,
          `  ${message}`,
          'commands:',
          ...this.log.map((line) => `  ${line}`),
          `reproduce: SLUICE_PROPERTY_SEED=${this.seed} SLUICE_PROPERTY_RUNS=1 node --import tsx --test test/e2e/lifecycle-property.test.ts`,
        ].join('\n'),
        { cause: error },
      );
    }
  }

  private async play(): Promise<void> {
    // Sometimes the slot is taken before the task exists, so it starts out queued.
    const blockedAtCreate = this.random() < 0.3;
    if (blockedAtCreate) await this.holdSlot();
    await this.create(blockedAtCreate);
    const count = MIN_COMMANDS + Math.floor(this.random() * (MAX_COMMANDS - MIN_COMMANDS + 1));
    for (let n = 0; n < count; n++) await this.perform(this.choose());
    // Leave nothing that holds the executor's slot for the next sequence.
    if (this.current.blocked) await this.perform('unblock', 'teardown');
    if (this.current.status === 'running') await this.perform('cancel', 'teardown');
    await this.checkWholeHistory();
  }

  private get current(): ModelState {
    assert.ok(this.state, 'the task exists');
    return this.state;
  }

  /** Picks the next command: any the situation allows, allowed requests more often than refused. */
  private choose(): ModelCommand {
    const state = this.current;
    const weights: Array<[ModelCommand, number]> = [];
    const add = (command: ModelCommand, weight: number) => {
      if (isApplicable(state, command)) weights.push([command, weight]);
    };
    add('release', 6);
    add('unblock', 3);
    add('block', 1.5);
    for (const [command, weight] of ALLOWED_WEIGHTS) {
      // About one command in five is refused: enough to check refusals without stalling the task.
      add(command, predict(state, command).allowed ? weight : weight / 5);
    }
    const total = weights.reduce((sum, [, w]) => sum + w, 0);
    let pick = this.random() * total;
    for (const [command, weight] of weights) {
      pick -= weight;
      if (pick < 0) return command;
    }
    return weights[weights.length - 1]?.[0] ?? 'cancel';
  }

  private async create(blocked: boolean): Promise<void> {
    const path = created(blocked);
    const { task } = await client.createTask({
      type: 'prop-flow',
      priority: PRIORITY,
      input: { label: `seed-${this.seed}` },
    });
    this.taskId = task.task_id;
    this.follower = new HistoryFollower(client, task.task_id);
    this.log.push(`create → ${describePath(path)}`);
    const problem = replyProblem(task, path);
    if (problem) throw new Error(`the CreateTask reply ${problem}`);
    await this.settle(path, Number(task.last_event_seq));
  }

  private async perform(command: ModelCommand, note = ''): Promise<void> {
    const state = this.current;
    const prediction = predict(state, command);
    const label = `${note ? `${note}: ` : ''}${command} on ${describeState(state)}`;
    this.log.push(
      `${label} → ${prediction.allowed ? describePath(prediction.path) : 'FAILED_PRECONDITION'}`,
    );
    if (isLifecycleCommand(command)) {
      const answer = await this.send(command);
      if (!prediction.allowed) {
        if (answer.ok) {
          throw new Error(
            `${command} was answered with ${statusOf(answer.task)} but the model refuses it (${prediction.reason})`,
          );
        }
        if (answer.code !== grpcStatus.FAILED_PRECONDITION) {
          throw new Error(
            `${command} answered ${grpcStatus[answer.code]} (${answer.details}), not FAILED_PRECONDITION`,
          );
        }
        await this.checkUnchanged(command);
        return;
      }
      if (!answer.ok) {
        throw new Error(
          `${command} answered ${grpcStatus[answer.code]} (${answer.details}); the model expects ${describePath(prediction.path)}`,
        );
      }
      const problem = replyProblem(answer.task, prediction.path);
      if (problem) throw new Error(`the ${command} reply ${problem}`);
      await this.settle(prediction.path, Number(answer.task.last_event_seq));
      return;
    }
    assert.ok(prediction.allowed, `${command} is always possible where applicable`);
    if (command === 'release') {
      const step = runningStep(state);
      assert.ok(step, 'a released step is latched');
      latch.release(`${this.taskId}:${step}`);
    } else if (command === 'block') {
      await this.holdSlot();
    } else {
      await this.freeSlot();
    }
    await this.settle(prediction.path, 0);
  }

  /** Sends a lifecycle request; a refusal is returned, not thrown. */
  private async send(
    command: LifecycleCommand,
  ): Promise<{ ok: true; task: Task } | { ok: false; code: grpcStatus; details: string }> {
    try {
      const call = {
        cancel: () => client.cancelTask(this.taskId, 'property test'),
        pause: () => client.pauseTask(this.taskId),
        resume: () => client.resumeTask(this.taskId),
        approve: () => client.approveTask(this.taskId, { approved: true, comment: 'go' }),
        reject: () => client.approveTask(this.taskId, { approved: false, comment: 'stop' }),
        retry: () => client.retryTask(this.taskId),
      }[command];
      return { ok: true, task: (await call()).task };
    } catch (error) {
      if (!isServiceError(error)) throw error;
      return { ok: false, code: error.code, details: error.details };
    }
  }

  /**
   * Waits until the task has moved along `path` to its settled end: `WatchTask` must show only
   * states on the path, reach the last, and show every event up to `minSeq` (the request's own);
   * a step the model says runs must have arrived at its latch. Then `GetTask` must agree.
   */
  private async settle(path: readonly [ModelState, ...ModelState[]], minSeq: number) {
    const follower = this.follower;
    assert.ok(follower);
    const target = settledState(path);
    const deadline = Date.now() + SETTLE_TIMEOUT_MS;
    await follower.until(
      (machine) => sameMachine(machine, target),
      (machine) => path.some((state) => sameMachine(machine, state)),
      minSeq,
      deadline,
      describePath(path),
    );
    const step = runningStep(target);
    if (step) {
      const key = `${this.taskId}:${step}`;
      await latch.arrived(key, target.arrivals[step], Math.max(1, deadline - Date.now()));
    }
    const { task } = await client.getTask(this.taskId);
    // Everything the task recorded so far was seen, and the events agree with the task row.
    await follower.until(
      () => true,
      () => true,
      Number(task.last_event_seq),
      deadline,
      'the last event',
    );
    const problem = viewProblem(task, target, true) ?? arrivalProblem(this.taskId, target);
    if (problem) throw new Error(`once settled, ${problem}`);
    if (!sameMachine(follower.machine, target)) {
      throw new Error(
        `the events say ${describeMachine(follower.machine)}, the model ${describeState(target)}`,
      );
    }
    this.state = target;
    this.snapshot = task;
  }

  /** A refused request changed nothing: same state, same last event. */
  private async checkUnchanged(command: LifecycleCommand): Promise<void> {
    const before = this.snapshot;
    assert.ok(before);
    const { task } = await client.getTask(this.taskId);
    const seen = (t: Task) => `${describeTask(t)}, last event ${t.last_event_seq}`;
    if (seen(task) !== seen(before)) {
      throw new Error(
        `the refused ${command} changed the task from ${seen(before)} to ${seen(task)}`,
      );
    }
  }

  /** Starts a `prop-hold` task and waits until it holds the executor's only slot. */
  private async holdSlot(): Promise<void> {
    const { task } = await client.createTask({ type: 'prop-hold', priority: PRIORITY, input: {} });
    this.blockerId = task.task_id;
    if (!this.state) this.log.push('block (before the task exists)');
    await latch.arrived(`${task.task_id}:hold`, 1, SETTLE_TIMEOUT_MS);
  }

  /** Lets the `prop-hold` task finish and waits until it did (its slot is free again). */
  private async freeSlot(): Promise<void> {
    const id = this.blockerId;
    assert.ok(id, 'a blocker runs');
    latch.release(`${id}:hold`);
    this.blockerId = undefined;
    await new HistoryFollower(client, id).until(
      (machine) => machine.status === 'succeeded',
      () => true,
      0,
      Date.now() + SETTLE_TIMEOUT_MS,
      'the blocker succeeded',
    );
  }

  /** The whole history, replayed from the start, is a path in the table and what was followed. */
  private async checkWholeHistory(): Promise<void> {
    const follower = this.follower;
    assert.ok(follower);
    const replay = new HistoryFollower(client, this.taskId);
    await replay.until(
      () => true,
      () => true,
      follower.seq,
      Date.now() + SETTLE_TIMEOUT_MS,
      'the whole history',
    );
    assertHistoryInTable(replay.transitions, 'the whole history');
    assert.deepEqual(
      replay.events.map((e) => `${e.seq} ${e.type}`),
      follower.events.map((e) => `${e.seq} ${e.type}`),
      'the watches saw every event once, in order',
    );
    this.log.push(`history: ${describeHistory(replay.transitions)}`);
    replay.transitions.forEach((entry, index) => {
      const from = index === 0 ? '—' : replay.transitions[index - 1]?.toStatus;
      const row = `${from} ${entry.event.type} ${entry.toStatus}`;
      rowsSeen.set(row, (rowsSeen.get(row) ?? 0) + 1);
    });
  }

  /** After a failure: free the slot and stop the task, so that the next sequence can run. */
  private async cleanUp(): Promise<void> {
    if (this.blockerId) latch.release(`${this.blockerId}:hold`);
    if (this.taskId && this.state?.status !== 'succeeded') {
      await client.cancelTask(this.taskId).catch(() => undefined);
    }
  }
}

// ---- Following a task's events ------------------------------------------------------------------

/**
 * Follows one task's events through `WatchTask`, replaying each transition through the table
 * (`core`): the state it derives is what the recorded history says, and a step that is not a path
 * in the table fails at once. Each wait opens a new watch from the last sequence seen.
 */
class HistoryFollower {
  seq = 0;
  machine: TaskMachineState = NO_TASK;
  readonly events: TaskEvent[] = [];
  readonly transitions: HistoryEntry[] = [];

  constructor(
    private readonly api: TaskClient,
    readonly taskId: string,
  ) {}

  /**
   * Reads events until `done(machine)` holds with every event up to `minSeq` seen. Each
   * transition must lead to a state `expected` accepts.
   *
   * @throws Error at the deadline, on an unexpected state, or when the task reached a final state
   * without `done` and nothing more is recorded.
   */
  async until(
    done: (machine: TaskMachineState) => boolean,
    expected: (machine: TaskMachineState) => boolean,
    minSeq: number,
    deadline: number,
    what: string,
  ): Promise<void> {
    const finished = () => this.seq >= minSeq && done(this.machine);
    if (finished()) return;
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), Math.max(1, deadline - Date.now()));
    try {
      for (;;) {
        for await (const event of this.api.watchTask(this.taskId, this.seq, controller.signal)) {
          const transition = this.apply(event);
          if (transition && !expected(this.machine)) {
            throw new Error(
              `event ${event.seq} (${event.type}) took the task to ${describeMachine(this.machine)}, ` +
                `off the predicted path ${what}`,
            );
          }
          if (finished()) return;
        }
        if (controller.signal.aborted) {
          throw new Error(
            `waited ${SETTLE_TIMEOUT_MS} ms for ${what}; the events say ` +
              `${describeMachine(this.machine)} after event ${this.seq}`,
          );
        }
        // The watch ends after an event to a final state: go on only if more was recorded since.
        const { task } = await this.api.getTask(this.taskId);
        if (Number(task.last_event_seq) <= this.seq) {
          throw new Error(
            `the task stays ${describeMachine(this.machine)} (event ${this.seq}), not ${what}`,
          );
        }
      }
    } finally {
      clearTimeout(timer);
      controller.abort();
    }
  }

  /** Takes one event; returns whether it was a transition. */
  private apply(event: TaskEvent): boolean {
    const seq = Number(event.seq);
    if (seq <= this.seq) {
      throw new Error(`event ${seq} (${event.type}) came again or out of order after ${this.seq}`);
    }
    this.seq = seq;
    this.events.push(event);
    if (event.to_status === 'TASK_STATUS_UNSPECIFIED') return false;
    const entry = historyEntry(event);
    const decision = decideTransition(this.machine, entry.event);
    if (!decision.ok || decision.to.status !== entry.toStatus) {
      throw new Error(
        `event ${seq} (${event.type} → ${entry.toStatus}) is not a path in the table from ` +
          `${describeMachine(this.machine)}: ${decision.ok ? `the table says ${decision.to.status}` : decision.reason}` +
          `; history ${describeHistory([...this.transitions, entry])}`,
      );
    }
    this.transitions.push(entry);
    this.machine = decision.to;
    return true;
  }
}

// ---- Comparing the task with the model ----------------------------------------------------------

function statusOf(task: Task): string {
  return task.status.slice('TASK_STATUS_'.length).toLowerCase();
}

function sameMachine(machine: TaskMachineState, state: ModelState): boolean {
  return (
    machine.status === state.status &&
    machine.cancelRequested === state.cancelRequested &&
    machine.pauseRequested === state.pauseRequested &&
    machine.approvalPending === state.approvalPending
  );
}

/**
 * How `task` differs from what the model says of `state` (undefined when it does not). The
 * current step is compared only when `withStep` and a step waits at its latch.
 */
function viewProblem(task: Task, state: ModelState, withStep: boolean): string | undefined {
  const expected: Record<string, unknown> = {
    status: state.status,
    cancel_requested: state.cancelRequested,
    pause_requested: state.pauseRequested,
    attempt: state.attempt,
    can_cancel: canCancel(state),
    approval: showsApproval(state) ? `${PROP_FLOW_PROMPT} (b)` : null,
    error: null,
  };
  const actual: Record<string, unknown> = {
    status: statusOf(task),
    cancel_requested: task.cancel_requested,
    pause_requested: task.pause_requested,
    attempt: task.attempt,
    can_cancel: task.can_cancel,
    approval: task.approval ? `${task.approval.prompt} (${task.approval.step})` : null,
    error: task.error ? `${task.error.error_class}: ${task.error.message}` : null,
  };
  const step = runningStep(state);
  if (withStep && step) {
    expected['current_step'] = step;
    actual['current_step'] = task.current_step;
  }
  const differences = Object.keys(expected)
    .filter((key) => expected[key] !== actual[key])
    .map((key) => `${key} is ${String(actual[key])}, the model says ${String(expected[key])}`);
  return differences.length > 0
    ? `the task (${statusOf(task)}) differs from ${describeState(state)}: ${differences.join('; ')}`
    : undefined;
}

/** How a reply differs from every state on the predicted path. */
function replyProblem(
  task: Task,
  path: readonly [ModelState, ...ModelState[]],
): string | undefined {
  if (path.some((state) => viewProblem(task, state, false) === undefined)) return undefined;
  return `shows ${describeTask(task)}, on no state of ${describePath(path)}: ${viewProblem(task, settledState(path), false)}`;
}

/** Every step of the task started as often as the model says (never again once it succeeded). */
function arrivalProblem(taskId: string, state: ModelState): string | undefined {
  for (const step of ['a', 'b', 'c'] as const satisfies readonly FlowStep[]) {
    const count = latch.arrivals.filter((a) => a.key === `${taskId}:${step}`).length;
    if (count !== state.arrivals[step]) {
      return `step ${step} started ${count} times, the model says ${state.arrivals[step]}`;
    }
  }
  return undefined;
}

// ---- Descriptions and small helpers -------------------------------------------------------------

function describePath(path: readonly ModelState[]): string {
  return path.map(describeState).join(' ⇒ ');
}

function describeMachine(machine: TaskMachineState): string {
  const flags = [
    machine.cancelRequested ? 'cancel_requested' : '',
    machine.pauseRequested ? 'pause_requested' : '',
    machine.approvalPending ? 'approval_pending' : '',
  ].filter((f) => f !== '');
  return `${machine.status ?? 'nothing'}${flags.length > 0 ? `[${flags.join(',')}]` : ''}`;
}

function describeTask(task: Task): string {
  const flags = [
    task.cancel_requested ? 'cancel_requested' : '',
    task.pause_requested ? 'pause_requested' : '',
  ].filter((f) => f !== '');
  return `${statusOf(task)}${flags.length > 0 ? `[${flags.join(',')}]` : ''} attempt ${task.attempt}`;
}

/**
 * A deterministic stream of numbers in [0, 1) from `seed`: the n-th is read from the SHA-256 of
 * `seed:n`. Slow for a PRNG, and plenty for a few hundred draws.
 */
function seededRandom(seed: number): () => number {
  let n = 0;
  return () => createHash('sha256').update(`${seed}:${n++}`).digest().readUInt32BE(0) / 2 ** 32;
}

function nonNegativeInteger(name: string, fallback: number): number {
  const text = process.env[name];
  if (text === undefined || text === '') return fallback;
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new Error(`${name} must be a non-negative integer, not ${text}`);
  }
  return value;
}
