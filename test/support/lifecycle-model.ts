/**
 * A model of one `prop-flow` task (test/e2e/property-task-types.ts: latched `a` → latched `b` →
 * approval → latched `c`) as its user sees it, for the live lifecycle property test. It is written
 * from the transition table of ARCHITECTURE.md, independently of `core`'s implementation of it, so
 * that the two can disagree.
 *
 * The test drives the task with {@link ModelCommand}s and waits after each until the task is
 * settled: nothing moves any more until the test does something (every step waits at a latch only
 * the test releases, the approval timeout is far away). The model predicts, for each command,
 * whether the table allows it and, if so, every state the task passes through until it is settled
 * again: the reply may show any of them (the services keep working while the gateway answers),
 * the last one is what the test waits for.
 *
 * Pure: no I/O, no clock, no randomness.
 */

/** The statuses a `prop-flow` task can reach in the test (no step ever fails). */
export type ModelStatus =
  'queued' | 'running' | 'waiting_approval' | 'paused' | 'cancelled' | 'succeeded';

/** The latched steps of `prop-flow`, in order. */
export type FlowStep = 'a' | 'b' | 'c';

/** What the task has to do next: a step, the approval between `b` and `c`, or nothing. */
export type PendingWork = FlowStep | 'approval' | 'done';

/** The task as its user sees it, plus what the test knows about the executor. */
export interface ModelState {
  readonly status: ModelStatus;
  readonly cancelRequested: boolean;
  readonly pauseRequested: boolean;
  /** Paused while the approval is still pending: a resume asks again. */
  readonly approvalPending: boolean;
  readonly attempt: number;
  /** The work in front of the task. Succeeded steps are never run again. */
  readonly pending: PendingWork;
  /** The step `pending` runs on the executor and waits at its latch. */
  readonly latched: boolean;
  /** A `prop-hold` task holds the executor's only slot: no step of the task can start. */
  readonly blocked: boolean;
  /** How many times each step has arrived at its latch (a cancelled step runs again on retry). */
  readonly arrivals: Readonly<Record<FlowStep, number>>;
}

/**
 * What the test can do. The lifecycle requests go through the API; `release` lets the latched step
 * finish; `block` starts a `prop-hold` task that takes the executor's only slot, `unblock`
 * releases it.
 */
export type ModelCommand =
  'cancel' | 'pause' | 'resume' | 'approve' | 'reject' | 'retry' | 'release' | 'block' | 'unblock';

export const LIFECYCLE_COMMANDS = [
  'cancel',
  'pause',
  'resume',
  'approve',
  'reject',
  'retry',
] as const;

/** The lifecycle requests of the API: the table decides whether each is allowed. */
export type LifecycleCommand = (typeof LIFECYCLE_COMMANDS)[number];

export function isLifecycleCommand(command: ModelCommand): command is LifecycleCommand {
  return (LIFECYCLE_COMMANDS as readonly string[]).includes(command);
}

/** The model's answer to a command. */
export type Prediction =
  | {
      readonly allowed: true;
      /**
       * Every state from the one the command itself commits to the settled one, in order, without
       * repeats. The reply of a lifecycle request shows one of them; the task ends in the last.
       */
      readonly path: readonly [ModelState, ...ModelState[]];
    }
  /** A lifecycle request the table does not allow: `FAILED_PRECONDITION`, and nothing changes. */
  | { readonly allowed: false; readonly reason: string };

/** The task right after `CreateTask` (queued), and its states until it is settled. */
export function created(blocked: boolean): readonly [ModelState, ...ModelState[]] {
  const state: ModelState = {
    status: 'queued',
    cancelRequested: false,
    pauseRequested: false,
    approvalPending: false,
    attempt: 1,
    pending: 'a',
    latched: false,
    blocked,
    arrivals: { a: 0, b: 0, c: 0 },
  };
  return settle(state);
}

/** The settled state of a prediction (the end of its path). */
export function settledState(path: readonly [ModelState, ...ModelState[]]): ModelState {
  return path[path.length - 1] ?? path[0];
}

/** Whether `command` can be tried at all in `state` (the test's own commands need a situation). */
export function isApplicable(state: ModelState, command: ModelCommand): boolean {
  switch (command) {
    case 'release':
      return state.latched;
    case 'block':
      // Only while no step of the task needs the slot, so the blocker surely gets it.
      return !state.blocked && state.status !== 'running' && state.status !== 'queued';
    case 'unblock':
      return state.blocked;
    default:
      return true; // every lifecycle request may be sent; the table decides
  }
}

/** Whether the table allows a cancel now (what `Task.can_cancel` shows). */
export function canCancel(state: ModelState): boolean {
  return decide(state, 'cancel').allowed;
}

/** Whether the task shows its approval request (waiting for it, or paused with it pending). */
export function showsApproval(state: ModelState): boolean {
  return state.status === 'waiting_approval' || state.approvalPending;
}

/**
 * The step the task shows as current while one of its steps runs (`undefined` when the model does
 * not say: the field is only checked while a step waits at its latch).
 */
export function runningStep(state: ModelState): FlowStep | undefined {
  return state.latched && isStep(state.pending) ? state.pending : undefined;
}

/** What `command` does to a settled task. */
export function predict(state: ModelState, command: ModelCommand): Prediction {
  if (!isApplicable(state, command)) {
    throw new Error(`${command} is not applicable to ${describeState(state)}`);
  }
  const decision = decide(state, command);
  if (!decision.allowed) return decision;
  return { allowed: true, path: settle(decision.next) };
}

type Decision =
  | { readonly allowed: true; readonly next: ModelState }
  | { readonly allowed: false; readonly reason: string };

const refuse = (state: ModelState, command: ModelCommand): Decision => ({
  allowed: false,
  reason: `${command} is not allowed on a ${describeState(state)} task`,
});

/** A state with the given changes and the request flags cleared unless given. */
function moved(state: ModelState, changes: Partial<ModelState>): ModelState {
  return { ...state, cancelRequested: false, pauseRequested: false, ...changes };
}

/** The immediate effect of a command: the state it commits to (not yet settled). */
function decide(state: ModelState, command: ModelCommand): Decision {
  const { status } = state;
  switch (command) {
    case 'cancel':
      switch (status) {
        case 'queued':
        case 'waiting_approval':
        case 'paused':
          return {
            allowed: true,
            next: moved(state, { status: 'cancelled', approvalPending: false }),
          };
        case 'running':
          // A cancel supersedes a requested pause; the running step is aborted.
          return state.cancelRequested
            ? refuse(state, command)
            : { allowed: true, next: moved(state, { cancelRequested: true }) };
        default:
          return refuse(state, command);
      }
    case 'pause':
      if (status === 'queued') return { allowed: true, next: moved(state, { status: 'paused' }) };
      if (status === 'running' && !state.pauseRequested && !state.cancelRequested) {
        // The running step may finish; nothing new starts.
        return { allowed: true, next: moved(state, { pauseRequested: true }) };
      }
      return refuse(state, command);
    case 'resume':
      if (status !== 'paused') return refuse(state, command);
      return {
        allowed: true,
        next: state.approvalPending
          ? moved(state, { status: 'waiting_approval', approvalPending: false })
          : moved(state, { status: 'queued' }),
      };
    case 'approve':
      if (status !== 'waiting_approval') return refuse(state, command);
      // The next step is admitted at once: the task runs, its step waits for the executor.
      return { allowed: true, next: moved(state, { status: 'running', pending: 'c' }) };
    case 'reject':
      // Cancelled with the approval still to ask: a retry asks again.
      return status === 'waiting_approval'
        ? { allowed: true, next: moved(state, { status: 'cancelled' }) }
        : refuse(state, command);
    case 'retry':
      return status === 'cancelled'
        ? {
            allowed: true,
            next: moved(state, { status: 'queued', attempt: state.attempt + 1, latched: false }),
          }
        : refuse(state, command);
    case 'release':
      return { allowed: true, next: finishStep(state) };
    case 'block':
      return { allowed: true, next: { ...state, blocked: true } };
    case 'unblock':
      return { allowed: true, next: { ...state, blocked: false } };
  }
}

/** The latched step succeeds: what follows it, with the requests that were pending. */
function finishStep(state: ModelState): ModelState {
  const unlatched = { ...state, latched: false };
  switch (state.pending) {
    case 'a':
      // `b` is admitted; `settle` starts it, or pauses the task if a pause was requested.
      return { ...unlatched, pending: 'b' };
    case 'b':
      // The step asked for approval. A pause requested while it ran is kept: the task is paused
      // "when the current step ends" (ARCHITECTURE.md), with the approval pending, so a resume
      // asks again — rather than waiting for a person who asked for it to pause.
      return state.pauseRequested
        ? moved(unlatched, { status: 'paused', pending: 'approval', approvalPending: true })
        : moved(unlatched, { status: 'waiting_approval', pending: 'approval' });
    case 'c':
      // Nothing is left to pause: the task is complete.
      return moved(unlatched, { status: 'succeeded', pending: 'done' });
    default:
      throw new Error(`no step is latched in ${describeState(state)}`);
  }
}

/**
 * What the services do by themselves from `state` until the task is settled: the states passed
 * through, starting with `state`.
 */
function settle(state: ModelState): [ModelState, ...ModelState[]] {
  const path: [ModelState, ...ModelState[]] = [state];
  for (;;) {
    const current = path[path.length - 1] ?? state;
    const following = nextOnItsOwn(current);
    if (following === undefined) return path;
    path.push(following);
  }
}

/** The one thing that happens next without the test, or `undefined` when the task is settled. */
function nextOnItsOwn(state: ModelState): ModelState | undefined {
  const { status, pending } = state;
  if (status === 'queued') {
    // A retry of a task whose pending work is the approval asks for it again: the task starts
    // and waits for the approval at once (no step runs).
    if (pending === 'approval') return moved(state, { status: 'running' });
    // Pickup: the step starts on the executor as soon as it has a free slot.
    if (isStep(pending) && !state.blocked) return startStep(moved(state, { status: 'running' }));
    return undefined;
  }
  if (status !== 'running') return undefined;
  // The running step is aborted (or the admitted one dropped): the cancel completes.
  if (state.cancelRequested) return moved(state, { status: 'cancelled', latched: false });
  if (pending === 'approval') return moved(state, { status: 'waiting_approval' });
  if (state.latched || !isStep(pending) || state.blocked) return undefined;
  // An admitted step reaches the executor: it starts, or goes back unstarted if a pause was
  // requested, and the task is paused once nothing of it runs.
  return state.pauseRequested ? moved(state, { status: 'paused' }) : startStep(state);
}

function startStep(state: ModelState): ModelState {
  const step = state.pending as FlowStep;
  return {
    ...state,
    latched: true,
    arrivals: { ...state.arrivals, [step]: state.arrivals[step] + 1 },
  };
}

function isStep(work: PendingWork): work is FlowStep {
  return work === 'a' || work === 'b' || work === 'c';
}

/** A short human description, for failure messages: `running[pause_requested] at a (latched)`. */
export function describeState(state: ModelState): string {
  const flags = [
    state.cancelRequested ? 'cancel_requested' : '',
    state.pauseRequested ? 'pause_requested' : '',
    state.approvalPending ? 'approval_pending' : '',
  ].filter((f) => f !== '');
  const where =
    state.pending === 'done' ? '' : ` before ${state.pending}${state.latched ? ' (latched)' : ''}`;
  return (
    `${state.status}${flags.length > 0 ? `[${flags.join(',')}]` : ''}${where}` +
    ` attempt ${state.attempt}${state.blocked ? ', slot blocked' : ''}`
  );
}
