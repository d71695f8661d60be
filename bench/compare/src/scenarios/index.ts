/** Every scenario by name, and the default set `all` runs (more join as they are written). */
import type { Scenario } from '../scenario.js';
import { drain } from './drain.js';
import { endToEnd } from './end-to-end.js';
import { footprint } from './footprint.js';
import { idlePickup } from './idle-pickup.js';
import { priority } from './priority.js';
import { threeStep } from './three-step.js';

export const SCENARIOS: ReadonlyMap<string, Scenario> = new Map(
  // three-step is in the full set, not the default one: run it by name (`-- three-step`).
  [drain, endToEnd, idlePickup, priority, footprint, threeStep].map((s) => [s.name, s]),
);

/**
 * What `npm run bench` (or `-- all`) runs, in this order: drain first, so that the latency
 * scenarios pace their arrivals by the drain rates it measured (rates.ts).
 */
export const DEFAULT_SCENARIOS: readonly string[] = [
  drain.name,
  endToEnd.name,
  idlePickup.name,
  priority.name,
  footprint.name,
];
