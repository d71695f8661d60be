/**
 * API messages for the unit tests of the renderings: a complete `Task` (every field as the wire
 * has it) with the fields a test cares about replaced.
 */
import { toDuration, toTimestamp, type Task, type TaskEvent } from '@sluice/api';

export const TASK_ID = '0f8f2f4e-5a6b-4c7d-8e9f-0a1b2c3d4e5f';
export const CREATED = new Date('2026-01-02T03:04:05.000Z');

/** A queued task as `GetTask` answers it, with `overrides` applied. */
export function taskWith(overrides: Partial<Task> = {}): Task {
  return {
    task_id: TASK_ID,
    tenant_id: 'acme',
    type: 'research-brief',
    type_version: 1,
    priority: 'PRIORITY_P1',
    input: '{"topic":"queues"}',
    idempotency_key: '',
    status: 'TASK_STATUS_QUEUED',
    current_step: 'outline',
    attempt: 1,
    error: null,
    trace_id: '4bf92f3577b34da6a3ce929d0e0e4736',
    create_time: toTimestamp(CREATED),
    start_time: null,
    finish_time: null,
    update_time: toTimestamp(CREATED),
    cancel_requested: false,
    pause_requested: false,
    output: '',
    last_event_seq: '1',
    progress: 0,
    progress_message: '',
    estimated_wait: toDuration(12_000),
    queue_position: 3,
    can_cancel: true,
    approval: null,
    next_attempt_time: null,
    waiting_for: '',
    ...overrides,
  };
}

/** An event of the task, with `overrides` applied. */
export function eventWith(overrides: Partial<TaskEvent> = {}): TaskEvent {
  return {
    task_id: TASK_ID,
    seq: '1',
    type: 'create',
    from_status: 'TASK_STATUS_UNSPECIFIED',
    to_status: 'TASK_STATUS_QUEUED',
    step: '',
    create_time: toTimestamp(CREATED),
    data: '',
    ...overrides,
  };
}
