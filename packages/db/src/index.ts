/**
 * `@sluice/db` — the Postgres side of Sluice: drizzle schema, migrations, the one transition
 * function and the queries of each service.
 *
 * @example
 * ```ts
 * import { migrateDatabase, openDatabase, applyTransitions } from '@sluice/db';
 * await migrateDatabase(url);
 * const { db, close } = openDatabase(url);
 * const [result] = await applyTransitions(db, [{ taskId, event: { type: 'cancel' } }]);
 * await close();
 * ```
 */
export { openDatabase, DEFAULT_POOL_SIZE } from './client.js';
export type {
  Database,
  DatabaseHandle,
  Executor,
  OpenDatabaseOptions,
  Transaction,
} from './client.js';
export { migrateDatabase, MIGRATIONS_FOLDER } from './migrate.js';
export {
  apiKeys,
  leaderEpochs,
  taskEvents,
  taskSteps,
  taskTypes,
  tasks,
  tenants,
} from './schema.js';
export type { ManifestStep } from './schema.js';
export { applyTransition, applyTransitions } from './transition.js';
export type { TransitionPatch, TransitionRequest, TransitionResult } from './transition.js';
export { createApiKey, createTenant, findKeyOwner, hashApiKey } from './queries/tenants.js';
export type { KeyOwner } from './queries/tenants.js';
export { findLatestTaskType, findTaskType, registerTaskType } from './queries/task-types.js';
export type { TaskTypeManifest } from './queries/task-types.js';
export {
  createTask,
  findTask,
  hashJson,
  isUuid,
  listTaskEvents,
  listTasks,
  lockTask,
} from './queries/tasks.js';
export type {
  CreateTaskResult,
  ListTasksQuery,
  NewTask,
  TaskEventRecord,
  TaskRecord,
} from './queries/tasks.js';
export {
  cancelWaitingSteps,
  claimReadySteps,
  findStep,
  heartbeatSteps,
  inFlightSteps,
  insertNextStep,
  lockUnappliedOutcomes,
  markOutcomesApplied,
  recordPublishSeqs,
  recordStepOutcome,
  releaseClaims,
  startStep,
} from './queries/steps.js';
export type {
  ClaimedStep,
  NewStep,
  StepDispatchRef,
  StepRecord,
  UnappliedOutcome,
} from './queries/steps.js';
export {
  TASK_EVENTS_CHANNEL,
  appendTaskEvent,
  markEventsPublished,
  unpublishedEvents,
} from './queries/events.js';
export { advanceLeaderEpoch } from './queries/leader-epochs.js';
export type { AppendedEvent } from './queries/events.js';
