/**
 * Task priorities. P0 is interactive work a user waits for; P3 is batch work. Stored and sent as the
 * number 0–3 (lower is more urgent), so ordering by priority is ordering by the number.
 */
export const Priority = { P0: 0, P1: 1, P2: 2, P3: 3 } as const;
export type Priority = (typeof Priority)[keyof typeof Priority];

/** All priorities, most urgent first. */
export const PRIORITIES: readonly Priority[] = [0, 1, 2, 3];

/** Type guard for untrusted numbers. */
export function isPriority(value: unknown): value is Priority {
  return value === 0 || value === 1 || value === 2 || value === 3;
}

/** `P0` … `P3`, for people and logs. */
export function priorityLabel(priority: Priority): `P${Priority}` {
  return `P${priority}`;
}

/**
 * How many of `capacity` slots the urgent reserve keeps for P0 alone: `percent` of them, rounded
 * down, so a small capacity (under 100 / `percent`) keeps none and every priority may use all of
 * it. Lower priorities may never take the reserved slots; P0 may take every slot. The reserve is
 * what lets interactive work start at once while batch work fills the rest — priority alone only
 * decides who gets the *next* free slot, which under a flood of long steps is a whole step away.
 */
export function urgentReserveSlots(capacity: number, percent: number): number {
  if (capacity <= 1 || percent <= 0) return 0;
  return Math.min(capacity - 1, Math.floor((capacity * percent) / 100));
}
