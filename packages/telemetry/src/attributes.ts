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
