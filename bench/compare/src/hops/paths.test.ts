/** The floor of a path: its legs' idle medians, each times its share. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { LatencySummary } from '../latency.js';
import { HOP_NAMES, type HopFigures, type HopName } from './hops.js';
import { floorOf, PATHS, SHORTEST_DURABLE_PATH, SLUICE_IDLE_PATH } from './paths.js';

function summary(p50: number): LatencySummary {
  return { count: 1, min: p50, p50, p95: p50 * 10, p99: p50 * 100, max: p50 * 100, mean: p50 };
}

/** Each hop with its own idle median (and a busy one that must not count). */
const IDLE_MEDIANS: Record<HopName, number> = {
  grpc: 4,
  'pg-read': 1,
  'pg-commit': 2,
  nats: 0.5,
  'jetstream-publish': 1.5,
  'jetstream-delivery': 1.25,
};
const FIGURES: HopFigures[] = HOP_NAMES.map((name) => ({
  name,
  idle: summary(IDLE_MEDIANS[name]),
  busy: summary(1_000),
  cpu: { clientMs: 1_000, serverMs: 1_000 },
}));

test('a path’s floor adds its legs’ idle medians, a half leg at half', () => {
  // ½ gRPC + create commit + delivery + start commit.
  assert.equal(floorOf(SHORTEST_DURABLE_PATH, FIGURES), 2 + 2 + 1.25 + 2);
  // ½ gRPC, three commits (the create, the claim, the start), a NATS message and a delivery.
  assert.equal(floorOf(SLUICE_IDLE_PATH, FIGURES), 2 + 3 * 2 + 0.5 + 1.25);
});

test('a path needing a hop that was not measured has no floor', () => {
  const withoutDelivery = FIGURES.filter((hop) => hop.name !== 'jetstream-delivery');
  assert.throws(() => floorOf(SHORTEST_DURABLE_PATH, withoutDelivery), /jetstream-delivery/);
});

test('every path is made of measured hops only', () => {
  for (const path of PATHS) {
    for (const leg of path.legs) assert.ok(HOP_NAMES.includes(leg.hop), `${path.name}: ${leg.hop}`);
  }
});
