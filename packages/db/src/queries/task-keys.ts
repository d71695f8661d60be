/**
 * What an idempotency key's holder must match for a create to be its repeat: the same type,
 * priority and input (compared by a hash of the canonical input).
 */
import { createHash } from 'node:crypto';
import { SluiceError, type Json } from '@sluice/core';
import type { NewTask, TaskRecord } from './tasks.js';

/** SHA-256 of a JSON value in canonical form (object keys sorted), so key order does not matter. */
export function hashJson(value: Json): string {
  return createHash('sha256').update(canonicalJson(value)).digest('hex');
}

function canonicalJson(value: Json): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(value[k] ?? null)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/**
 * The earlier holder of the key (a task, or a deleted task's tombstone) when the repeat asks for
 * the same thing; otherwise the `already_exists` error every conflicting repeat gets.
 */
export function checkSameRequest<T extends KeyHolder>(
  holder: T,
  task: NewTask,
  inputHash: string,
): T {
  const same =
    holder.type === task.taskType.name &&
    holder.priority === task.priority &&
    holder.inputHash === inputHash;
  if (!same) {
    throw new SluiceError(
      'already_exists',
      `idempotency key "${task.idempotencyKey}" was used for task ${holderId(holder)} with a different type, priority or input`,
      { field: 'idempotency_key' },
    );
  }
  return holder;
}

/** What a task and a tombstone both tell about the request that took a key. */
export type KeyHolder = Pick<TaskRecord, 'type' | 'priority' | 'inputHash'> &
  ({ readonly id: string } | { readonly taskId: string });

function holderId(holder: KeyHolder): string {
  return 'taskId' in holder ? holder.taskId : holder.id;
}
