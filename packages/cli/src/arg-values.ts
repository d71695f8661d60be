/**
 * Option values as people type them (`p1`, `waiting-approval`, `20`) turned into the API's values,
 * or a {@link UsageError} that lists what is accepted.
 */
import { PRIORITY_VALUES, TASK_STATUS_VALUES, type Priority, type TaskStatus } from '@sluice/api';
import { UsageError } from './command.js';

const PRIORITIES = PRIORITY_VALUES.filter((p) => p !== 'PRIORITY_UNSPECIFIED');
const STATUSES = TASK_STATUS_VALUES.filter((s) => s !== 'TASK_STATUS_UNSPECIFIED');

/** `P0`…`P3` (any case, also `0`…`3` and `PRIORITY_P1`) as the API's priority. */
export function parsePriority(text: string, option = '--priority'): Priority {
  const normalized = text
    .trim()
    .toUpperCase()
    .replace(/^PRIORITY_/, '');
  const found = PRIORITIES.find(
    (p) => p === `PRIORITY_${normalized}` || p === `PRIORITY_P${normalized}`,
  );
  if (!found) throw new UsageError(`${option} must be one of P0, P1, P2, P3 (got "${text}")`);
  return found;
}

/** A state word (`running`, `waiting_approval`, `waiting-approval`, `TASK_STATUS_PAUSED`). */
export function parseStatus(text: string, option = '--status'): TaskStatus {
  const normalized = text
    .trim()
    .toUpperCase()
    .replace(/-/g, '_')
    .replace(/^TASK_STATUS_/, '');
  const found = STATUSES.find((s) => s === `TASK_STATUS_${normalized}`);
  if (!found) {
    const words = STATUSES.map((s) => s.slice('TASK_STATUS_'.length).toLowerCase());
    throw new UsageError(`${option} must be one of ${words.join(', ')} (got "${text}")`);
  }
  return found;
}

/** A whole number of at least `min` (decimal digits only: no `1e3`, no `0x10`). */
export function parseCount(text: string, option: string, min: number): number {
  const value = /^\d+$/.test(text.trim()) ? Number(text.trim()) : Number.NaN;
  if (!Number.isSafeInteger(value) || value < min) {
    throw new UsageError(`${option} must be a whole number of at least ${min} (got "${text}")`);
  }
  return value;
}
