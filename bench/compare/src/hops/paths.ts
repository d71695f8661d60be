/**
 * Paths as sequences of hops (hops.ts), and their floor on this machine: the sum of their hops'
 * idle medians. A path's real latency is its floor plus the work each process does between hops;
 * the floor is what no tuning of that work can go below.
 */
import type { HopFigures, HopName } from './hops.js';

/** One leg of a path: `share` of a hop (½ for the request half of a round trip). */
export interface Leg {
  readonly hop: HopName;
  readonly share: number;
  readonly what: string;
}

export interface Path {
  readonly name: string;
  readonly description: string;
  readonly legs: readonly Leg[];
}

/**
 * Sluice's create → handler start on an idle stack, as it runs now: session 14's timing probes
 * (gateway, scheduler and executor each stamped these points), less what sessions 24–26 took out —
 * the key and task type come from the gateway's memory for a caller it has served before (its
 * insert confirms them), a keyed create whose key is new sends `begin`, the insert, a check and
 * `commit` in one write, and the dispatcher claims in one write on a connection it keeps. A
 * caller's first create reads the key and type first (one `pg-read` more).
 */
export const SLUICE_IDLE_PATH: Path = {
  name: 'sluice',
  description: 'Sluice now: create (with an idempotency key) → handler start',
  legs: [
    { hop: 'grpc', share: 0.5, what: '`CreateTask` reaches the gateway (the request half)' },
    {
      hop: 'pg-commit',
      share: 1,
      what: 'the create: `begin`, the insert, its check and `commit` in one write',
    },
    { hop: 'nats', share: 1, what: 'wake-up of the scheduler' },
    {
      hop: 'pg-commit',
      share: 1,
      what: 'the claim: `begin`, the admission lock, the claim and `commit` in one write',
    },
    { hop: 'jetstream-delivery', share: 1, what: 'the dispatch, published and delivered' },
    { hop: 'pg-commit', share: 1, what: 'the step’s start, one statement' },
  ],
};

/**
 * The shortest path of any design that records the task before answering and the step's start
 * before its handler runs (so that a step runs once per dispatch): one commit each, one broker
 * hop between them, behind a gRPC API.
 */
export const SHORTEST_DURABLE_PATH: Path = {
  name: 'shortest durable',
  description: 'any design with a durable create and a durable start, behind gRPC',
  legs: [
    { hop: 'grpc', share: 0.5, what: 'the create request reaches the API' },
    { hop: 'pg-commit', share: 1, what: 'the create, one statement' },
    { hop: 'jetstream-delivery', share: 1, what: 'the step, published and delivered' },
    { hop: 'pg-commit', share: 1, what: 'the start, one statement' },
  ],
};

export const PATHS: readonly Path[] = [SLUICE_IDLE_PATH, SHORTEST_DURABLE_PATH];

/** The sum of the legs' idle medians (ms); throws when a leg's hop was not measured. */
export function floorOf(path: Path, figures: readonly HopFigures[]): number {
  return path.legs.reduce((sum, leg) => {
    const hop = figures.find((figure) => figure.name === leg.hop);
    if (!hop) throw new Error(`path ${path.name} needs hop ${leg.hop}, which was not measured`);
    return sum + leg.share * hop.idle.p50;
  }, 0);
}
