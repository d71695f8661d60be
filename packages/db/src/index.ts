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
export { openDatabase, DEFAULT_POOL_SIZE, DEFAULT_CONNECT_TIMEOUT_MS } from './client.js';
export { isDatabaseUnavailable } from './unavailable.js';
export { isDeadlock } from './deadlock.js';
export { isWriteRefused } from './refused.js';
export { GroupWriter, MAX_ITEMS_PER_WRITE, type GroupWrite } from './group-writer.js';
export { GroupReader, type GroupRead } from './group-reader.js';
export { KeptConnection } from './kept-connection.js';
export {
  ATTR_DB_COLLECTION_NAME,
  ATTR_DB_NAMESPACE,
  ATTR_DB_OPERATION_NAME,
  ATTR_DB_QUERY_SUMMARY,
  ATTR_DB_RESPONSE_STATUS_CODE,
  ATTR_DB_SYSTEM_NAME,
  ATTR_SERVER_ADDRESS,
  ATTR_SERVER_PORT,
  DATABASE_TRACER,
  connectionAttributes,
  withDatabaseSpan,
} from './tracing.js';
export type { DatabaseOperation } from './tracing.js';
export type {
  Database,
  DatabaseHandle,
  Executor,
  OpenDatabaseOptions,
  Transaction,
} from './client.js';
export { MIGRATION_LOCK_KEY, migrateDatabase, MIGRATIONS_FOLDER } from './migrate.js';
export {
  apiKeys,
  breakerTransitions,
  breakers,
  deadLetters,
  governorOverrides,
  idempotencyTombstones,
  leaderEpochs,
  resourceLimits,
  taskEvents,
  taskSteps,
  taskTimers,
  taskTypes,
  tasks,
  tenantLimits,
  tenants,
} from './schema.js';
export type {
  DeadLetterReason,
  GovernorOverrideKind,
  ManifestStep,
  PendingApproval,
} from './schema.js';
export { applyLockedTransitions, applyTransition, applyTransitions } from './transition.js';
export type {
  LockedTaskState,
  TransitionPatch,
  TransitionRequest,
  TransitionResult,
} from './transition.js';
export {
  createApiKey,
  createTenant,
  findKeyOwner,
  findKeyOwners,
  hashApiKey,
} from './queries/tenants.js';
export type { KeyOwner } from './queries/tenants.js';
export {
  findLatestTaskTypes,
  findTaskType,
  firstStepOf,
  registerTaskType,
} from './queries/task-types.js';
export type {
  RegisteredTaskType,
  TaskTypeManifest,
  TaskTypeManifestStep,
  WhileBreakerOpen,
} from './queries/task-types.js';
export {
  breakerOpenError,
  failStepWhileBreakerOpen,
  findFailFastSteps,
} from './queries/breaker-fail-fast.js';
export type { FailFastStep } from './queries/breaker-fail-fast.js';
export {
  createTask,
  findTask,
  isUuid,
  keepApprovalForRetry,
  listTaskEvents,
  listTasks,
  lockTask,
  lockTasks,
  submitTask,
} from './queries/tasks.js';
export { submitTasks, submitTasksClaiming } from './queries/task-batch.js';
export { StaleReads } from './queries/remembered-reads.js';
export type { RememberedReads, RememberedType } from './queries/remembered-reads.js';
export type { SubmittedTasks, UrgentClaim } from './queries/task-batch.js';
export { claimUrgentSteps, prepareUrgentClaim } from './queries/urgent-claim.js';
export { prepareCreates } from './queries/create-warm-up.js';
export { hashJson } from './queries/task-keys.js';
export type {
  CreateTaskResult,
  ListTasksQuery,
  NewTask,
  SubmitTaskResult,
  TaskEventRecord,
  TaskRecord,
} from './queries/tasks.js';
export {
  DEFAULT_ADMISSION,
  DEFAULT_THROTTLE_RESERVE,
  claimAdmission,
  claimAdmissionOn,
  claimReadySteps,
  claimReadyStepsStatement,
} from './queries/claim.js';
export type { AdmissionClaim, AdmissionSettings, ClaimedStep } from './queries/claim.js';
export { recordPublishSeqs, releaseClaims } from './queries/publication.js';
export {
  cancelWaitingSteps,
  findStep,
  heartbeatSteps,
  inFlightSteps,
  failStepWhoseContinuationFailed,
  hasStepsForRetry,
  insertSteps,
  rerunUnfinishedSteps,
  releaseStep,
  startStep,
} from './queries/steps.js';
export type { NewStep, StepDispatchRef, StepRecord } from './queries/steps.js';
export { lockUnappliedOutcomes, markOutcomesApplied } from './queries/unapplied-outcomes.js';
export type { UnappliedOutcome } from './queries/unapplied-outcomes.js';
export { hasTasksToSettle, lockTasksToSettle } from './queries/tasks-to-settle.js';
export type { TaskToSettle } from './queries/tasks-to-settle.js';
export {
  hasOtherActiveSteps,
  nextAttemptAt,
  scheduleStepRetry,
  waitingRetry,
} from './queries/step-retries.js';
export type { WaitingRetry } from './queries/step-retries.js';
export {
  outcomeWriteStatements,
  recordStepOutcome,
  recordStepOutcomes,
  recordStepOutcomesIn,
} from './queries/step-outcomes.js';
export type { OutcomeRecording, OutcomeToRecord, ReadyStepRef } from './queries/step-outcomes.js';
export { joinIfComplete, startContinuation } from './queries/continuations.js';
export type { ContinuationOrigin, ContinuationResult } from './queries/continuations.js';
export {
  TimerKind,
  addTimer,
  armApprovalTimer,
  closeTimers,
  lockDueTimers,
  markTimersDone,
  nextTimerDue,
} from './queries/timers.js';
export type { TimerRecord } from './queries/timers.js';
export {
  TASK_EVENTS_CHANNEL,
  appendTaskEvent,
  listenForTaskEvents,
  markEventsPublished,
  markPublishedAndReadUnpublished,
  unpublishedEvents,
} from './queries/events.js';
export { advanceLeaderEpoch } from './queries/leader-epochs.js';
export {
  MIN_CHANGES_FOR_ANALYZE,
  QUEUE_TABLES,
  analyzeQueueTables,
  queueTablesDueForAnalyze,
} from './queries/table-statistics.js';
export type { QueueTable } from './queries/table-statistics.js';
export { readUrgentWaits } from './queries/urgent-waits.js';
export type { InFlightByUrgency, UrgentWait, UrgentWaitReading } from './queries/urgent-waits.js';
export type { AppendedEvent } from './queries/events.js';
export {
  findTenant,
  issueApiKey,
  listApiKeys,
  listTenants,
  revokeApiKey,
} from './queries/tenants.js';
export type { ApiKeyRecord, IssuedApiKey, TenantRecord } from './queries/tenants.js';
export { ADMISSION_RATE_WINDOW_MS, estimateWaitMs, queueStanding } from './queries/queue.js';
export { msUntilNextReadyStep, msUntilNextTimer } from './queries/due-work.js';
export type { QueueStanding } from './queries/queue.js';
export { latestApproval, outputsBefore, recordStepProgress } from './queries/step-context.js';
export { startUsualSteps } from './queries/step-start.js';
export type { UsualStart } from './queries/step-start.js';
export type { RecordedApproval, StepProgress } from './queries/step-context.js';
export {
  deadLettersOfTask,
  findDeadLetter,
  insertDeadLetter,
  listDeadLetters,
  lockDeadLetter,
  markDeadLetterRedriven,
  markTaskDeadLettersRedriven,
  purgeDeadLetters,
} from './queries/dead-letters.js';
export type {
  DeadLetterCursor,
  DeadLetterRecord,
  ListDeadLettersQuery,
  NewDeadLetter,
} from './queries/dead-letters.js';
export { failLostStep, findStaleSteps, requeueLostStep } from './queries/reconcile.js';
export { openDeadLetterOfStep, repairHistoryOf } from './queries/failures.js';
export type { RepairHistory, RepairQuery } from './queries/failures.js';
export type {
  FindStaleStepsOptions,
  SeenStep,
  StaleStep,
  StaleStepKind,
} from './queries/reconcile.js';
export {
  RETAINED_FINAL_STATUSES,
  deleteExpiredTombstones,
  deleteFinishedTasks,
  findLiveTombstone,
} from './queries/retention.js';
export type {
  DeleteFinishedTasksOptions,
  DeletedTasks,
  IdempotencyTombstone,
} from './queries/retention.js';
export {
  ADMISSION_LOCK_NAMESPACE,
  ANY_RESOURCE,
  DEFAULT_RESOURCE_LIMIT,
  clearResourceLimit,
  clearTenantLimit,
  lockAdmission,
  setResourceLimit,
  setTenantLimit,
} from './queries/admission.js';
export type { AdmissionLock, TenantLimit } from './queries/admission.js';
export { explainAnalyze } from './queries/explain.js';
export {
  GOVERNOR_LEADER_ROLE,
  dueBreakerCoolDowns,
  loadBreakers,
  recentBreakerTransitions,
  saveBreaker,
} from './queries/breakers.js';
export type { BreakerTransitionRecord, BreakerWrite, StoredBreaker } from './queries/breakers.js';
export {
  MAX_OVERRIDE_LIMIT,
  OVERRIDE_KINDS,
  OVERRIDE_LOCK_NAMESPACE,
  activeOverrides,
  addOverride,
  clearExpiredOverrides,
  clearOverride,
  validateOverride,
} from './queries/overrides.js';
export type { NewOverride, Override } from './queries/overrides.js';
export {
  databaseConnectionUsage,
  queueDepths,
  retryShare,
  signalStatements,
  stepLatencies,
} from './queries/pressure-signals.js';
export type {
  ConnectionUsage,
  InFlightDepth,
  QueueDepths,
  ReadyDepth,
  RetryShare,
  StepLatency,
} from './queries/pressure-signals.js';
