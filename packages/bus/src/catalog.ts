/**
 * The one place where NATS names are made: streams, subjects, consumers and KV buckets.
 *
 * Every name is derived from a deployment prefix (`sluice` in production, a unique one per test run),
 * and every caller-supplied token (resource, tenant, task id, priority) is validated before it can
 * reach a subject, so nobody concatenates `"sluice.step." + resource` by hand.
 */
import {
  isPriority,
  prefixProblem,
  resourceFileToken,
  resourceProblem,
  SluiceError,
  tenantIdProblem,
} from '@sluice/core';
import type { NameProblem, Priority } from '@sluice/core';

/** The prefix of a production deployment. */
export const DEFAULT_PREFIX = 'sluice';

/**
 * Who a core-NATS wake-up is for: `scheduler`, all of its loops (a lifecycle request, a released
 * step); `dispatch`, only its admission (new ready steps: a created task, which gives the outcome
 * and settle passes nothing to do); `relay`, the event relay.
 */
export type WakeTarget = 'scheduler' | 'dispatch' | 'relay';

/** The wake-up targets, for validation and iteration. */
export const WAKE_TARGETS: readonly WakeTarget[] = ['scheduler', 'dispatch', 'relay'];

/** Every NATS name of one deployment. Build it with {@link createBusCatalog}. */
export interface BusCatalog {
  /** The validated prefix everything below derives from. */
  readonly prefix: string;
  readonly streams: {
    /** Work-queue stream of admitted step dispatches: `<PREFIX>_STEPS`. */
    readonly steps: string;
    /** Limits stream of task events for subscribers: `<PREFIX>_EVENTS`. */
    readonly events: string;
    /** Limits stream keeping the steps stream's dead-letter advisories: `<PREFIX>_ADVISORIES`. */
    readonly advisories: string;
  };
  readonly subjects: {
    /** `<prefix>.step.<resource>.p<N>`: where the scheduler publishes one resource's dispatches. */
    step(resource: string, priority: Priority): string;
    /** `<prefix>.step.>`: the subjects of the steps stream. */
    readonly stepsAll: string;
    /** `<prefix>.events.<tenant>.<task>`: one task's event notices. */
    events(tenantId: string, taskId: string): string;
    /** `<prefix>.events.<tenant>.*`: every task event of one tenant. */
    tenantEvents(tenantId: string): string;
    /** `<prefix>.events.>`: the subjects of the events stream (the gateway's one subscription). */
    readonly eventsAll: string;
    /** `<prefix>.wake.<target>`: core NATS, fire-and-forget; losing one only delays work. */
    wake(target: WakeTarget): string;
    /** `<prefix>.result`: core NATS wake-up that a step outcome was recorded in Postgres. */
    readonly stepResult: string;
    /** `<prefix>.control.cancel.<task>`: core NATS request to abort a running step of a task. */
    cancel(taskId: string): string;
    /** `<prefix>.control.cancel.*`: what executors subscribe to. */
    readonly cancelAll: string;
    /** `<prefix>.governor.decisions`: core NATS notice that the governor changed a decision. */
    readonly governorDecisions: string;
    /** `<prefix>.governor.reports`: core NATS, each executor's load and outcome counters. */
    readonly executorReports: string;
    /** `<prefix>.scheduler.guard`: core NATS, each scheduler's urgent-wait guard caps. */
    readonly guardCaps: string;
    /** `$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.<PREFIX>_STEPS.*` (any step consumer). */
    readonly stepMaxDeliveriesAdvisory: string;
    /** `$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.<PREFIX>_STEPS.*` (any step consumer). */
    readonly stepTerminatedAdvisory: string;
  };
  readonly consumers: {
    /** Durable pull consumer of one resource and priority: `<prefix>_step_<resource>_p<N>`. */
    step(resource: string, priority: Priority): string;
    /** The dead-letter worker's durable consumer of the advisories stream: `<prefix>_dead_letters`. */
    readonly deadLetters: string;
  };
  readonly buckets: {
    /** KV bucket of leader leases (bucket TTL = lease TTL): `<prefix>_leases`. */
    readonly leases: string;
    /** KV bucket of the governor's live decisions (no TTL): `<prefix>_governor`. */
    readonly governor: string;
  };
}

/**
 * Task ids become one subject token. They are UUIDs in practice; accept any short token of
 * letters, digits, `_` and `-` so that nothing that could split or widen a subject gets through.
 */
const TASK_ID = /^[A-Za-z0-9_-]{1,64}$/;

/** Why a task id cannot be a subject token; `undefined` when it can. */
export function taskIdTokenProblem(value: unknown): NameProblem {
  if (typeof value !== 'string' || value.length === 0) return 'task id is required';
  if (!TASK_ID.test(value)) return `task id "${value.slice(0, 40)}" must match [A-Za-z0-9_-]{1,64}`;
  return undefined;
}

function ensure(problem: NameProblem, field: string): void {
  if (problem !== undefined) {
    throw new SluiceError('invalid_argument', problem, { field });
  }
}

function ensurePriority(priority: unknown): asserts priority is Priority {
  if (!isPriority(priority)) {
    throw new SluiceError('invalid_argument', `priority ${String(priority)} must be 0, 1, 2 or 3`, {
      field: 'priority',
    });
  }
}

/**
 * Builds every NATS name of a deployment from its prefix.
 *
 * @param prefix lower-case letters, digits and `_`, starting with a letter, at most 32 characters
 *   (see `prefixProblem` in `@sluice/core`); defaults to `sluice`.
 * @throws SluiceError (`invalid_argument`) for a bad prefix, and from the name builders for a bad
 *   resource, tenant id, task id, priority or wake target.
 */
export function createBusCatalog(prefix: string = DEFAULT_PREFIX): BusCatalog {
  ensure(prefixProblem(prefix), 'prefix');
  const upper = prefix.toUpperCase();
  const steps = `${upper}_STEPS`;

  const stepToken = (resource: string, priority: Priority): string => {
    ensure(resourceProblem(resource), 'resource');
    ensurePriority(priority);
    return `p${priority}`;
  };

  const catalog: BusCatalog = {
    prefix,
    streams: {
      steps,
      events: `${upper}_EVENTS`,
      advisories: `${upper}_ADVISORIES`,
    },
    subjects: {
      // A colon is legal inside a subject token, so `tool:http` is kept as it is here.
      step: (resource, priority) => `${prefix}.step.${resource}.${stepToken(resource, priority)}`,
      stepsAll: `${prefix}.step.>`,
      events: (tenantId, taskId) => {
        ensure(tenantIdProblem(tenantId), 'tenant_id');
        ensure(taskIdTokenProblem(taskId), 'task_id');
        return `${prefix}.events.${tenantId}.${taskId}`;
      },
      tenantEvents: (tenantId) => {
        ensure(tenantIdProblem(tenantId), 'tenant_id');
        return `${prefix}.events.${tenantId}.*`;
      },
      eventsAll: `${prefix}.events.>`,
      wake: (target) => {
        if (!WAKE_TARGETS.includes(target)) {
          throw new SluiceError('invalid_argument', `unknown wake target "${String(target)}"`, {
            field: 'target',
          });
        }
        return `${prefix}.wake.${target}`;
      },
      stepResult: `${prefix}.result`,
      cancel: (taskId) => {
        ensure(taskIdTokenProblem(taskId), 'task_id');
        return `${prefix}.control.cancel.${taskId}`;
      },
      cancelAll: `${prefix}.control.cancel.*`,
      governorDecisions: `${prefix}.governor.decisions`,
      executorReports: `${prefix}.governor.reports`,
      guardCaps: `${prefix}.scheduler.guard`,
      stepMaxDeliveriesAdvisory: `$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.${steps}.*`,
      stepTerminatedAdvisory: `$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.${steps}.*`,
    },
    consumers: {
      // Consumer names become file names on the server, where `:` is not welcome.
      step: (resource, priority) => {
        const token = stepToken(resource, priority);
        return `${prefix}_step_${resourceFileToken(resource)}_${token}`;
      },
      deadLetters: `${prefix}_dead_letters`,
    },
    buckets: {
      leases: `${prefix}_leases`,
      governor: `${prefix}_governor`,
    },
  };
  return deepFreeze(catalog);
}

function deepFreeze<T extends object>(value: T): T {
  for (const child of Object.values(value)) {
    if (typeof child === 'object' && child !== null) deepFreeze(child as object);
  }
  return Object.freeze(value);
}
