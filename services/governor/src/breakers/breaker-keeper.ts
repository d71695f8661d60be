/**
 * The circuit breakers of the cluster, as the leading governor keeps them: loaded from Postgres
 * when a tenure begins, moved on by the step outcomes the executors report and by due cool-downs,
 * and written back (fenced by the leader epoch) whenever they change. Postgres is the record —
 * breaker states and their cool-down timers survive the loss of JetStream's store and a change of
 * leader; the decision document in KV is only the live view.
 *
 * The core state machine (`@sluice/core` circuit-breaker) decides; admission applies the views:
 * `open` admits nothing for the resource, `half_open` admits at most `probes` steps in flight.
 */
import {
  CLOSED_BREAKER,
  fireBreakerCoolDown,
  recordBreakerOutcome,
  type BreakerConfig,
  type BreakerState,
  type BreakerTransition,
} from '@sluice/core';
import type { BreakerView } from '@sluice/bus';
import type { OutcomeDelta } from '../signals/executor-reports.js';

/** Where breaker states are kept (Postgres, fenced by the caller's epoch). */
export interface BreakerStore {
  load(): Promise<ReadonlyArray<{ readonly resource: string; readonly state: BreakerState }>>;
  /** Writes a state (and the transition that led to it); false when fenced out (deposed). */
  save(resource: string, state: BreakerState, transition?: BreakerTransition): Promise<boolean>;
}

/** A transition as it happened, for logs and metrics. */
export interface BreakerChange extends BreakerTransition {
  readonly resource: string;
}

/** Which resources have breakers: every external tool and MCP server by default. */
export function hasBreaker(resource: string): boolean {
  return resource.startsWith('tool:') || resource.startsWith('mcp:');
}

export class BreakerKeeper {
  private readonly states = new Map<string, BreakerState>();

  constructor(
    private readonly config: BreakerConfig,
    private readonly store: BreakerStore,
  ) {}

  /** Reads the stored states; call once when a tenure begins. */
  async load(): Promise<void> {
    this.states.clear();
    for (const { resource, state } of await this.store.load()) this.states.set(resource, state);
  }

  /**
   * Records the outcomes reported since the last tick and fires due cool-downs, then saves what
   * changed. Within one tick the order of the calls is unknown, so they are recorded evenly mixed
   * ({@link evenlyMixed}): a tick of failures alone continues a streak, and a tick of a few
   * failures among many successes makes no streak, as a steady error rate does not. (Recording all
   * of a tick's successes first made its failures a streak of their own: at 100 calls a second
   * with 5 % failing, a working tool's breaker would open as soon as a tick held five failures.)
   *
   * @returns the transitions made, or `undefined` when a save was fenced out (the caller was
   *   deposed and must stop acting).
   */
  async tick(
    outcomes: ReadonlyMap<string, OutcomeDelta>,
    nowMs: number,
  ): Promise<BreakerChange[] | undefined> {
    const changes: BreakerChange[] = [];
    const touched = new Map<string, BreakerTransition | undefined>();
    const move = (resource: string, state: BreakerState, transition?: BreakerTransition) => {
      this.states.set(resource, state);
      if (transition) {
        changes.push({ resource, ...transition });
        touched.set(resource, transition);
      } else if (!touched.has(resource)) {
        touched.set(resource, undefined);
      }
    };
    // The outcomes reported since the last tick came while the breakers were as they are now: one
    // whose cool-down ends at this tick was open for them (no probe can have run before its
    // half-open state is published), so they are recorded before the cool-downs fire.
    const open = [...this.states].filter(([, state]) => state.status === 'open');
    for (const [resource, delta] of outcomes) {
      if (!hasBreaker(resource)) continue;
      for (const ok of evenlyMixed(delta.succeeded, delta.failed)) {
        const before = this.states.get(resource) ?? CLOSED_BREAKER;
        const result = recordBreakerOutcome(before, { ok, atMs: nowMs }, this.config);
        if (result.state !== before) move(resource, result.state, result.transition);
      }
    }
    for (const [resource, state] of open) {
      const fired = fireBreakerCoolDown(state, nowMs);
      if (fired.transition) move(resource, fired.state, fired.transition);
    }
    for (const [resource, transition] of touched) {
      const state = this.states.get(resource);
      if (state && !(await this.store.save(resource, state, transition))) return undefined;
    }
    return changes;
  }

  /** The state of one breaker (closed when never seen). */
  get(resource: string): BreakerState {
    return this.states.get(resource) ?? CLOSED_BREAKER;
  }

  /** The breakers that are not closed, as admission sees them. */
  views(): Record<string, BreakerView> {
    const views: Record<string, BreakerView> = {};
    for (const [resource, state] of this.states) {
      if (state.status !== 'closed') views[resource] = state.status;
    }
    return views;
  }

  /** Every known breaker and its status, for metrics and AdminService. */
  all(): Array<{ readonly resource: string; readonly state: BreakerState }> {
    return [...this.states].map(([resource, state]) => ({ resource, state }));
  }
}

/**
 * `succeeded` successes (true) and `failed` failures (false) spread as evenly as their counts
 * allow: the order a tick's calls most likely had when nothing says which came first. The successes
 * part the failures into `succeeded + 1` runs whose lengths differ by at most one, so failures run
 * together only where they outnumber the successes, at most `ceil(failed / (succeeded + 1))` in a
 * row, and a tick of failures alone is one run.
 */
export function evenlyMixed(succeeded: number, failed: number): boolean[] {
  const calls: boolean[] = [];
  const runs = succeeded + 1;
  for (let run = 0; run < runs; run++) {
    const failures = Math.floor(((run + 1) * failed) / runs) - Math.floor((run * failed) / runs);
    for (let i = 0; i < failures; i++) calls.push(false);
    if (run < succeeded) calls.push(true);
  }
  return calls;
}
