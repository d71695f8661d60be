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
