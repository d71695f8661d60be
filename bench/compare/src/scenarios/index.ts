/** Every scenario by name, and the default set `all` runs (more join as they are written). */
import type { Scenario } from '../scenario.js';
import { drain } from './drain.js';

export const SCENARIOS: ReadonlyMap<string, Scenario> = new Map([[drain.name, drain]]);

/** What `npm run bench` (or `-- all`) runs. */
export const DEFAULT_SCENARIOS: readonly string[] = ['drain'];
