/**
 * `@sluice/core` — the pure domain of Sluice: task states and the transition table, priorities,
 * error classes, step outcomes and name validation. No I/O happens here.
 *
 * @example
 * ```ts
 * import { decideTransition, NO_TASK } from '@sluice/core';
 * const created = decideTransition(NO_TASK, { type: 'create' });
 * if (created.ok) decideTransition(created.to, { type: 'cancel' }); // → cancelled
 * ```
 */
export {
  TaskStatus,
  TASK_STATUSES,
  FINAL_STATUSES,
  isFinalStatus,
  isTaskStatus,
  TaskEventType,
  TASK_EVENT_TYPES,
  isTaskEventType,
  NO_TASK,
  decideTransition,
  eventFromRecord,
  allowedSourceStatuses,
  historyProblem,
} from './task-state.js';
export type {
  ApprovalTimeoutAction,
  TaskEvent,
  TaskMachineState,
  TransitionDecision,
  HistoryEntry,
} from './task-state.js';
export { StepStatus, STEP_STATUSES, IN_FLIGHT_STEP_STATUSES, isStepStatus } from './step-status.js';
export { storableText, unstorableCharacter } from './storable-text.js';
export { Priority, PRIORITIES, isPriority, priorityLabel, urgentReserveSlots } from './priority.js';
export {
  ErrorClass,
  ERROR_CLASSES,
  isErrorClass,
  isRetryableClass,
  SluiceError,
  SluiceErrorCode,
  isSluiceError,
  assertNever,
} from './errors.js';
export type { SerializedStepError, SluiceErrorOptions } from './errors.js';
export {
  MAX_APPROVAL_TIMEOUT_MS,
  MAX_FAN_OUT_BRANCHES,
  continuationOf,
  failedOutcome,
  stepsStartedBy,
} from './step-outcome.js';
export type { Continuation, Json, StepCall, StepOutcome, StepOutcomeType } from './step-outcome.js';
export {
  MAX_NAME_LENGTH,
  tenantIdProblem,
  taskTypeProblem,
  resourceProblem,
  stepNameProblem,
  prefixProblem,
  resourceFileToken,
} from './names.js';
export type { NameProblem } from './names.js';
export { MAX_RETRY_AFTER_MS, backoffOf, decideRetry } from './retry-policy.js';
export type { RetryBackoff, RetryDecision, RetryQuestion } from './retry-policy.js';
export { decideRepair, repairInputOf } from './repair-policy.js';
export type { RepairDecision, RepairInput, RepairQuestion } from './repair-policy.js';
export {
  DEFAULT_RETRY_BUDGET,
  placeRetry,
  retriesAllowed,
  retryBudgetProblem,
  windowOf,
} from './retry-budget.js';
export type { RetryBudgetConfig, RetryPlacement, RetryPlacementQuestion } from './retry-budget.js';
// Backpressure decisions (docs/architecture.md): the short names of the modules are qualified here.
export {
  DEFAULT_ADAPTIVE_LIMIT,
  adaptiveLimitProblem,
  concurrencyOf,
  initialAdaptiveLimit,
  observe as observeAdaptiveLimit,
} from './backpressure/adaptive-limit.js';
export type {
  AdaptiveLimitConfig,
  AdaptiveLimitSample,
  AdaptiveLimitState,
} from './backpressure/adaptive-limit.js';
export {
  applyRateLimitHeaders,
  correct as correctLlmBudget,
  newLlmBudget,
  refill as refillBucket,
  take as takeLlmBudget,
} from './backpressure/token-bucket.js';
export type {
  Bucket,
  LlmBudget,
  LlmCost,
  RateLimitHeaders,
  TakeDecision,
} from './backpressure/token-bucket.js';
export {
  CLOSED_BREAKER,
  DEFAULT_BREAKER,
  breakerConfigProblem,
  decide as decideBreaker,
  fireCoolDown as fireBreakerCoolDown,
  record as recordBreakerOutcome,
  windowTotals as breakerWindowTotals,
} from './backpressure/circuit-breaker.js';
export type {
  BreakerBucket,
  BreakerConfig,
  BreakerDecision,
  BreakerOutcome,
  BreakerRecordResult,
  BreakerState,
  BreakerStatus,
  BreakerTransition,
} from './backpressure/circuit-breaker.js';
export {
  PRESSURE_LEVELS,
  hysteresisProblem,
  initialLevel,
  nextLevel,
  severityOf,
  worstLevel,
} from './backpressure/hysteresis.js';
export type {
  CombinedLevel,
  HysteresisConfig,
  LevelState,
  LevelThreshold,
  PressureLevel,
  SignalLevel,
} from './backpressure/hysteresis.js';
