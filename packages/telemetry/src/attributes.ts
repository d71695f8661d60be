/**
 * Span and log attribute names of Sluice, in one place.
 *
 * Every service tags its spans with these keys so a trace can be searched by task, tenant, step or
 * resource in Jaeger regardless of which process recorded the span. They are span attributes only:
 * task and tenant ids are unbounded, so they never become metric labels (see `metrics.ts`).
 */

/** The task's id (a UUID). */
export const ATTR_TASK_ID = 'sluice.task.id';

/** The tenant that owns the task. */
export const ATTR_TENANT = 'sluice.tenant';

/** The step's name within its task type, e.g. `summarize`. */
export const ATTR_STEP = 'sluice.step';

/** The resource a step runs on, e.g. `llm` or `tool:http`. */
export const ATTR_RESOURCE = 'sluice.resource';

/** The task's priority, `P0` (most urgent) to `P3`. */
export const ATTR_PRIORITY = 'sluice.priority';

/** The task type's registered name, e.g. `summarize-url`. */
export const ATTR_TASK_TYPE = 'sluice.task.type';

/** The attempt of a step instance (1 for the first), on step spans and retry events. */
export const ATTR_STEP_ATTEMPT = 'sluice.step.attempt';

/**
 * How many creates shared the transaction of a task's create (the gateway group-commits concurrent
 * `CreateTask`s of a tenant; 1: written alone), on the create's database span.
 */
export const ATTR_CREATE_GROUP_SIZE = 'sluice.create.group_size';

/**
 * The span event of one state change of a task, on a span in the task's trace. Its attributes:
 * {@link ATTR_TASK_EVENT}, {@link ATTR_TASK_STATUS_FROM}, {@link ATTR_TASK_STATUS_TO} and, when the
 * change is about a step, {@link ATTR_STEP}.
 */
export const EVENT_TASK_TRANSITION = 'sluice.task.transition';

/** The transition-table event that changed the state, e.g. `fail_retryable`, `await_approval`. */
export const ATTR_TASK_EVENT = 'sluice.task.event';

/** The task's status before a transition, e.g. `running`. */
export const ATTR_TASK_STATUS_FROM = 'sluice.task.status.from';

/** The task's status after a transition, e.g. `failed_retryable`. */
export const ATTR_TASK_STATUS_TO = 'sluice.task.status.to';

/**
 * The span event of a failed step attempt that will run again. Its attributes: {@link ATTR_STEP},
 * {@link ATTR_STEP_ATTEMPT} (the attempt that failed), `error.type` (the error class) and
 * {@link ATTR_RETRY_NEXT_ATTEMPT_AT}.
 */
export const EVENT_STEP_RETRY_SCHEDULED = 'sluice.step.retry_scheduled';

/** When a retried step is due again (ISO 8601). */
export const ATTR_RETRY_NEXT_ATTEMPT_AT = 'sluice.retry.next_attempt_at';
