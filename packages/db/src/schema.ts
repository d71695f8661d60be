/**
 * The Postgres schema of Sluice (drizzle-orm). Postgres is the source of truth: task rows, step rows
 * (the ready steps are the queue), events, task type manifests, tenants and API keys.
 *
 * Migrations are generated from this file by drizzle-kit (`pnpm --filter @sluice/db generate`) and
 * checked in under `packages/db/migrations`.
 */
import { sql } from 'drizzle-orm';
import {
  bigint,
  doublePrecision,
  bigserial,
  boolean,
  check,
  index,
  integer,
  jsonb,
  pgTable,
  primaryKey,
  smallint,
  text,
  timestamp,
  uniqueIndex,
  uuid,
} from 'drizzle-orm/pg-core';
import type {
  ApprovalTimeoutAction,
  BreakerState,
  BreakerStatus,
  Continuation,
  Json,
  SerializedStepError,
  StepOutcome,
} from '@sluice/core';

/** An approval a task waits for (or waited for when it was paused or cancelled). */
export interface PendingApproval {
  readonly prompt: string;
  /** The step that asked. */
  readonly step: string;
  readonly timeoutMs: number;
  readonly onTimeout: ApprovalTimeoutAction;
  /** When the current wait times out (ISO time); re-armed when a paused task resumes. */
  readonly deadline: string;
  /** What runs once approved. */
  readonly then: Continuation;
  /** The sequence of the step that asked (the origin of `then`). */
  readonly originSeq: number;
}

const createdAt = () => timestamp('created_at', { withTimezone: true }).notNull().defaultNow();

/** A customer of the platform; every task belongs to one. */
export const tenants = pgTable('tenants', {
  id: text('id').primaryKey(),
  name: text('name').notNull(),
  createdAt: createdAt(),
});

/**
 * API keys, stored as SHA-256 hashes of the secret (the secret is shown once, at creation). A key
 * names its tenant; an admin key may call `AdminService`.
 */
export const apiKeys = pgTable(
  'api_keys',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    tenantId: text('tenant_id')
      .notNull()
      .references(() => tenants.id),
    keyHash: text('key_hash').notNull(),
    /** The first characters of the key, to tell keys apart in listings without the secret. */
    keyPrefix: text('key_prefix').notNull(),
    isAdmin: boolean('is_admin').notNull().default(false),
    createdAt: createdAt(),
    revokedAt: timestamp('revoked_at', { withTimezone: true }),
  },
  (t) => [uniqueIndex('api_keys_key_hash_uq').on(t.keyHash)],
);

/** One step of a task type's manifest. */
export interface ManifestStep {
  readonly name: string;
  readonly resource: string;
  readonly timeoutMs: number;
  readonly maxAttempts: number;
  /** The step's own retry backoff, replacing its error class's for the fields given. */
  readonly backoff?: { readonly baseDelayMs?: number; readonly maxDelayMs?: number };
  /** The step that repairs this one after a `schema_validation` failure. */
  readonly repairStep?: string;
  /**
   * What the step does while its resource's circuit breaker is open: `wait` (absent: manifests
   * registered before the option existed) or `fail` fast as retryable.
   */
  readonly whileBreakerOpen?: 'wait' | 'fail';
}

/**
 * Task type manifests, registered by the executors that run them. Each task pins the version it was
 * created with.
 */
export const taskTypes = pgTable(
  'task_types',
  {
    name: text('name').notNull(),
    version: integer('version').notNull(),
    /** JSON Schema of the task's input; the gateway validates against it. */
    inputSchema: jsonb('input_schema').$type<Record<string, unknown>>().notNull(),
    /** The step a new task starts with. */
    firstStep: text('first_step').notNull(),
    steps: jsonb('steps').$type<ManifestStep[]>().notNull(),
    description: text('description').notNull().default(''),
    registeredAt: timestamp('registered_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.name, t.version] })],
);

/** A task: one unit of work a client asked for, made of steps. */
export const tasks = pgTable(
  'tasks',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    tenantId: text('tenant_id')
      .notNull()
      .references(() => tenants.id),
    type: text('type').notNull(),
    typeVersion: integer('type_version').notNull(),
    /** 0 (P0, most urgent) … 3 (P3). */
    priority: smallint('priority').notNull(),
    input: jsonb('input').$type<Json>().notNull(),
    /** SHA-256 of the canonical input, to tell an idempotent repeat from a conflicting one. */
    inputHash: text('input_hash').notNull(),
    idempotencyKey: text('idempotency_key'),
    status: text('status').notNull(),
    cancelRequested: boolean('cancel_requested').notNull().default(false),
    pauseRequested: boolean('pause_requested').notNull().default(false),
    approvalPending: boolean('approval_pending').notNull().default(false),
    /** The step running or waiting now (for people; the step rows are the record). */
    currentStep: text('current_step'),
    /** Progress of the current step as its handler last reported it, 0 to 1. */
    progress: doublePrecision('progress').notNull().default(0),
    progressMessage: text('progress_message').notNull().default(''),
    /** The pending approval (set by an `awaitApproval` outcome, cleared by the decision). */
    approval: jsonb('approval').$type<PendingApproval>(),
    attempt: integer('attempt').notNull().default(1),
    /** Optimistic concurrency: every transition increments it. */
    version: integer('version').notNull().default(1),
    /** The sequence number of the task's newest event. */
    lastEventSeq: integer('last_event_seq').notNull().default(0),
    error: jsonb('error').$type<SerializedStepError>(),
    output: jsonb('output').$type<Json>(),
    traceId: text('trace_id'),
    /** W3C `traceparent` of the task's root span, so later work continues the same trace. */
    traceParent: text('trace_parent'),
    // Millisecond precision, like the JavaScript Date of a page token, so keyset pages are exact.
    createdAt: timestamp('created_at', { withTimezone: true, precision: 3 }).notNull().defaultNow(),
    startedAt: timestamp('started_at', { withTimezone: true }),
    finishedAt: timestamp('finished_at', { withTimezone: true }),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    uniqueIndex('tasks_tenant_idempotency_uq')
      .on(t.tenantId, t.idempotencyKey)
      .where(sql`${t.idempotencyKey} is not null`),
    index('tasks_tenant_created_idx').on(t.tenantId, t.createdAt, t.id),
    // Retention's scan: the finished tasks, oldest first, without reading the live ones.
    index('tasks_finished_idx')
      .on(t.finishedAt, t.id)
      .where(sql`${t.status} in ('succeeded', 'failed_terminal', 'cancelled')`),
    // The settler's candidates (lockTasksToSettle): running tasks asked to cancel or pause, and
    // queued tasks with an approval pending — few rows, found without reading the backlog.
    // On the id, not updated_at: indexing a column every event bumps would make those updates
    // non-HOT (a new entry in every index of the table).
    index('tasks_settle_requested_idx')
      .on(t.id)
      .where(sql`${t.status} = 'running' and (${t.cancelRequested} or ${t.pauseRequested})`),
    index('tasks_queued_approval_idx')
      .on(t.id)
      .where(sql`${t.status} = 'queued' and ${t.approval} is not null`),
    check('tasks_priority_ck', sql`${t.priority} between 0 and 3`),
  ],
);

/**
 * One step instance of a task. Rows in status `ready` with a due time in the past are the ready
 * queue: each carries its task's tenant and priority and its resource, so the scheduler admits from
 * one indexed query.
 */
export const taskSteps = pgTable(
  'task_steps',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    taskId: uuid('task_id')
      .notNull()
      .references(() => tasks.id),
    /** Position within the task (1, 2, …); with the task id, the step's idempotency key. */
    seq: integer('seq').notNull(),
    name: text('name').notNull(),
    resource: text('resource').notNull(),
    tenantId: text('tenant_id').notNull(),
    priority: smallint('priority').notNull(),
    status: text('status').notNull(),
    input: jsonb('input').$type<Json>().notNull(),
    /** The task attempt this step belongs to. */
    taskAttempt: integer('task_attempt').notNull().default(1),
    /** How many times this step was started on an executor. */
    attempts: integer('attempts').notNull().default(0),
    /** For a branch of a fan-out: the sequence of the step that fanned out, and its place. */
    fanOutOf: integer('fan_out_of'),
    branchIndex: integer('branch_index'),
    /** For the join step of a fan-out: the sequence of the step that fanned out. */
    joinOf: integer('join_of'),
    /**
     * The sequence that names this step in its idempotency key (`<task>:<seq>`): its own, except
     * for a step a manual retry runs again, which keeps the key of the step it repeats.
     */
    keySeq: integer('key_seq'),
    /** A failed or cancelled step that a manual retry has run again as a new step row. */
    superseded: boolean('superseded').notNull().default(false),
    /** How many times this step was published; part of the message id, so re-dispatch is new. */
    dispatchCount: integer('dispatch_count').notNull().default(0),
    dueAt: timestamp('due_at', { withTimezone: true }).notNull().defaultNow(),
    dispatchedAt: timestamp('dispatched_at', { withTimezone: true }),
    /** JetStream stream sequence of the latest dispatch message. */
    publishSeq: bigint('publish_seq', { mode: 'number' }),
    startedAt: timestamp('started_at', { withTimezone: true }),
    heartbeatAt: timestamp('heartbeat_at', { withTimezone: true }),
    finishedAt: timestamp('finished_at', { withTimezone: true }),
    /** What the step asked for next, recorded by the executor before it acknowledges. */
    outcome: jsonb('outcome').$type<StepOutcome>(),
    /** When the scheduler turned the outcome into the task's next transition. */
    outcomeAppliedAt: timestamp('outcome_applied_at', { withTimezone: true }),
    createdAt: createdAt(),
  },
  (t) => [
    uniqueIndex('task_steps_task_seq_uq').on(t.taskId, t.seq),
    index('task_steps_ready_idx')
      .on(t.priority, t.dueAt, t.id)
      .where(sql`${t.status} = 'ready'`),
    // The steps in flight: what the reconciler scans, without reading finished ones.
    index('task_steps_in_flight_idx')
      .on(t.id)
      .where(sql`${t.status} in ('dispatched', 'running')`),
    // Ready steps not due yet (backoffs, scheduled retries): the settler's third kind of candidate.
    index('task_steps_ready_due_idx')
      .on(t.dueAt)
      .where(sql`${t.status} = 'ready'`),
    // Admission reads the oldest ready steps of each (resource, tenant, priority).
    index('task_steps_ready_group_idx')
      .on(t.resource, t.tenantId, t.priority, t.dueAt, t.id)
      .where(sql`${t.status} = 'ready'`),
    // In-flight counts per resource and tenant: what admission compares with the limits.
    index('task_steps_in_flight_resource_idx')
      .on(t.resource, t.tenantId)
      .where(sql`${t.status} in ('dispatched', 'running')`),
    // Steps by priority and their latest activity (dispatch, start or finish): what recent
    // windows read — the admissions behind GetTask's estimated wait, the P0 starts behind the
    // urgent-wait guard, the governor's latency and retry signals — each a range of the window's
    // steps, however long ago a step was dispatched and however much history the last hour holds.
    // The readers take the expression from latestStepActivity (queries/step-activity.ts).
    index('task_steps_activity_idx').on(
      t.priority,
      sql`greatest(${t.dispatchedAt}, ${t.startedAt}, ${t.finishedAt})`,
    ),
    index('task_steps_unapplied_idx')
      .on(t.id)
      .where(sql`${t.outcome} is not null and ${t.outcomeAppliedAt} is null`),
    check('task_steps_priority_ck', sql`${t.priority} between 0 and 3`),
  ],
);

/**
 * The history of every task: transitions (with from/to states) and other facts such as step
 * progress, with a per-task sequence. Written in the same transaction as the change it records,
 * and never changed after (retention deletes a finished task's rows with it); the statement that
 * inserts an event also puts its id in {@link taskEventOutbox}, from which the event relay
 * publishes.
 */
export const taskEvents = pgTable(
  'task_events',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    taskId: uuid('task_id')
      .notNull()
      .references(() => tasks.id),
    tenantId: text('tenant_id').notNull(),
    seq: integer('seq').notNull(),
    type: text('type').notNull(),
    fromStatus: text('from_status'),
    toStatus: text('to_status'),
    step: text('step'),
    data: jsonb('data').$type<Record<string, Json>>(),
    createdAt: createdAt(),
  },
  (t) => [uniqueIndex('task_events_task_seq_uq').on(t.taskId, t.seq)],
);

/**
 * The events the relay has not published yet, by id: inserted with the event, deleted once the
 * event is on JetStream. A row of its own rather than a "published" column on the event, because
 * marking the event would rewrite the whole event row and its indexes (a column of a partial
 * index's predicate cannot change in place), where deleting this row writes a few bytes; the
 * events stay insert-only, and this table holds only what is in flight (decisions.md, "The relay
 * publishes from an outbox of event ids"). No foreign key: the insert comes from the same
 * statement as the event, and a check would lock the event row for nothing.
 */
export const taskEventOutbox = pgTable('task_event_outbox', {
  eventId: bigint('event_id', { mode: 'number' }).primaryKey(),
});

/**
 * Durable timers: things that must happen later (approval timeouts now; retry backoff and breaker
 * cool-downs later), fired once by the service that owns the kind, surviving every restart.
 */
export const taskTimers = pgTable(
  'task_timers',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    taskId: uuid('task_id')
      .notNull()
      .references(() => tasks.id),
    kind: text('kind').notNull(),
    dueAt: timestamp('due_at', { withTimezone: true }).notNull(),
    /** Facts the firing needs, e.g. which approval wait this timer belongs to. */
    data: jsonb('data').$type<Record<string, Json>>(),
    createdAt: createdAt(),
    /** Set when fired or made moot (the approval was decided): a timer fires at most once. */
    doneAt: timestamp('done_at', { withTimezone: true }),
  },
  (t) => [
    index('task_timers_due_idx')
      .on(t.dueAt, t.id)
      .where(sql`${t.doneAt} is null`),
    // Retention deletes a finished task's timers by task id.
    index('task_timers_task_idx').on(t.taskId),
  ],
);

/**
 * Leader epochs: a monotonic number per role, incremented by every new leader, so a deposed leader's
 * late writes can be recognised and refused (fencing). Kept in Postgres because it must survive the
 * loss of JetStream's store.
 */
export const leaderEpochs = pgTable('leader_epochs', {
  role: text('role').primaryKey(),
  epoch: bigint('epoch', { mode: 'number' }).notNull(),
  holder: text('holder').notNull(),
  updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
});

/** Why a dead letter was written. */
export type DeadLetterReason = 'attempts_exhausted' | 'max_deliveries' | 'terminated';

/**
 * Dead letters: work that ended where no retry reaches it, kept for people to inspect, redrive or
 * purge. Written by the scheduler when a step's attempts run out (`attempts_exhausted`), and by the
 * advisory worker for a step message JetStream gave up on (`max_deliveries`, `terminated`), which
 * also records the message's stream sequence. Purging deletes the row.
 */
export const deadLetters = pgTable(
  'dead_letters',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    taskId: uuid('task_id')
      .notNull()
      .references(() => tasks.id),
    tenantId: text('tenant_id').notNull(),
    step: text('step').notNull(),
    stepSeq: integer('step_seq').notNull(),
    reason: text('reason').$type<DeadLetterReason>().notNull(),
    error: jsonb('error').$type<SerializedStepError>().notNull(),
    attempts: integer('attempts').notNull(),
    /** JetStream stream sequence of the step message, for letters from the advisory path. */
    streamSeq: bigint('stream_seq', { mode: 'number' }),
    // Millisecond precision, like the JavaScript Date of a page token, so keyset pages are exact.
    createdAt: timestamp('created_at', { withTimezone: true, precision: 3 }).notNull().defaultNow(),
    /** When a redrive retried the task; `null` while the letter waits for a decision. */
    redrivenAt: timestamp('redriven_at', { withTimezone: true }),
  },
  (t) => [
    index('dead_letters_created_idx').on(t.createdAt, t.id),
    index('dead_letters_tenant_created_idx').on(t.tenantId, t.createdAt, t.id),
    index('dead_letters_task_idx').on(t.taskId),
    check(
      'dead_letters_reason_ck',
      sql`${t.reason} in ('attempts_exhausted', 'max_deliveries', 'terminated')`,
    ),
  ],
);

/**
 * Idempotency tombstones: what is left of a task's idempotency key once retention deleted the task,
 * so a late duplicate `CreateTask` still finds the original (or the same conflict error) instead of
 * creating a second task. Written in the transaction that deletes the task; deleted by retention in
 * turn once `expires_at` has passed, after which the key is free again.
 */
export const idempotencyTombstones = pgTable(
  'idempotency_tombstones',
  {
    tenantId: text('tenant_id').notNull(),
    idempotencyKey: text('idempotency_key').notNull(),
    /** The deleted task that held the key. */
    taskId: uuid('task_id').notNull(),
    /** What a repeat must match to be the same request: the task's type, priority and input hash. */
    type: text('type').notNull(),
    typeVersion: integer('type_version').notNull(),
    priority: smallint('priority').notNull(),
    inputHash: text('input_hash').notNull(),
    /** The task's final status, and when it was created and finished. */
    status: text('status').notNull(),
    taskCreatedAt: timestamp('task_created_at', { withTimezone: true, precision: 3 }).notNull(),
    finishedAt: timestamp('finished_at', { withTimezone: true }),
    /** When retention deleted the task. */
    createdAt: createdAt(),
    expiresAt: timestamp('expires_at', { withTimezone: true }).notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId, t.idempotencyKey] }),
    index('idempotency_tombstones_expires_idx').on(t.expiresAt),
  ],
);

/**
 * Admission limits per resource class: at most `max_in_flight` steps of the resource dispatched or
 * running at once, across every scheduler replica. A resource without a row gets the scheduler's
 * default (`SLUICE_DEFAULT_RESOURCE_LIMIT`).
 */
export const resourceLimits = pgTable(
  'resource_limits',
  {
    resource: text('resource').primaryKey(),
    maxInFlight: integer('max_in_flight').notNull(),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [check('resource_limits_max_ck', sql`${t.maxInFlight} >= 0`)],
);

/**
 * Per-tenant shares of a resource (`*`: every resource without a row of its own). `floor` in-flight
 * steps are admitted before any tenant at or over its floor; `cap` is the most the tenant ever has
 * in flight on the resource (`null`: only the resource limit bounds it).
 */
export const tenantLimits = pgTable(
  'tenant_limits',
  {
    tenantId: text('tenant_id').notNull(),
    resource: text('resource').notNull(),
    floor: integer('floor').notNull().default(0),
    cap: integer('cap'),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId, t.resource] }),
    check('tenant_limits_floor_ck', sql`${t.floor} >= 0`),
    check('tenant_limits_cap_ck', sql`${t.cap} is null or ${t.cap} >= ${t.floor}`),
  ],
);

/**
 * Circuit breakers, one row per guarded resource (`tool:search`, `mcp:files`): the cluster's one
 * state, written only by the governor leader and fenced by its leader epoch, so a deposed governor's
 * late write cannot overwrite its successor's. `cool_down_until` is the durable cool-down timer of
 * an open breaker: a restarted governor finds the due ones with one indexed query.
 */
export const breakers = pgTable(
  'breakers',
  {
    resource: text('resource').primaryKey(),
    /** `state.status`, as a column so it can be checked and filtered. */
    status: text('status').$type<BreakerStatus>().notNull(),
    /** The whole core `BreakerState`, as `circuit-breaker.ts` reads and writes it. */
    state: jsonb('state').$type<BreakerState>().notNull(),
    /** `state.coolDownUntilMs`: when an open breaker may probe again. */
    coolDownUntil: timestamp('cool_down_until', { withTimezone: true }),
    /** Leader epoch (role `governor`) of the governor that wrote the row. */
    epoch: bigint('epoch', { mode: 'number' }).notNull(),
    /** When `status` last changed. */
    changedAt: timestamp('changed_at', { withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    index('breakers_cool_down_idx')
      .on(t.coolDownUntil)
      .where(sql`${t.status} = 'open'`),
    check('breakers_status_ck', sql`${t.status} in ('closed', 'open', 'half_open')`),
  ],
);

/** Every status change of a breaker, for `AdminService` and post-mortems. */
export const breakerTransitions = pgTable(
  'breaker_transitions',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    resource: text('resource').notNull(),
    fromStatus: text('from_status').$type<BreakerStatus>().notNull(),
    toStatus: text('to_status').$type<BreakerStatus>().notNull(),
    reason: text('reason').notNull(),
    /** Leader epoch of the governor that recorded it. */
    epoch: bigint('epoch', { mode: 'number' }).notNull(),
    at: timestamp('at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    index('breaker_transitions_resource_at_idx').on(t.resource, t.at),
    check(
      'breaker_transitions_status_ck',
      sql`${t.fromStatus} in ('closed', 'open', 'half_open') and ${t.toStatus} in ('closed', 'open', 'half_open')`,
    ),
  ],
);

/** What a manual override of the governor acts on. */
export type GovernorOverrideKind = 'breaker' | 'priority' | 'limit';

/**
 * Manual overrides of the governor, set by people through `AdminService`: force a breaker open or
 * closed (`breaker`, target a resource, value `open`|`closed`), hold or release a priority
 * (`priority`, target `0`..`3`, value `hold`|`release`), or pin a resource's concurrency (`limit`,
 * target a resource, value a positive integer). At most one uncleared override per (kind, target):
 * a new one clears the old. Rows are kept once cleared or expired, as the record of who did what.
 */
export const governorOverrides = pgTable(
  'governor_overrides',
  {
    id: bigserial('id', { mode: 'bigint' }).primaryKey(),
    kind: text('kind').$type<GovernorOverrideKind>().notNull(),
    target: text('target').notNull(),
    value: text('value').notNull(),
    reason: text('reason').notNull(),
    createdAt: createdAt(),
    /** When it stops applying on its own; `null`: until cleared. */
    expiresAt: timestamp('expires_at', { withTimezone: true }),
    /** When it was cleared (by a person, a newer override, or the expiry sweep). */
    clearedAt: timestamp('cleared_at', { withTimezone: true }),
  },
  (t) => [
    uniqueIndex('governor_overrides_uncleared_uq')
      .on(t.kind, t.target)
      .where(sql`${t.clearedAt} is null`),
    check('governor_overrides_kind_ck', sql`${t.kind} in ('breaker', 'priority', 'limit')`),
    check(
      'governor_overrides_value_ck',
      sql`(${t.kind} = 'breaker' and ${t.value} in ('open', 'closed'))
        or (${t.kind} = 'priority' and ${t.target} in ('0', '1', '2', '3') and ${t.value} in ('hold', 'release'))
        or (${t.kind} = 'limit' and ${t.value} ~ '^[1-9][0-9]{0,8}$')`,
    ),
    check('governor_overrides_target_ck', sql`length(${t.target}) > 0`),
    check('governor_overrides_reason_ck', sql`length(btrim(${t.reason})) > 0`),
    check(
      'governor_overrides_expires_ck',
      sql`${t.expiresAt} is null or ${t.expiresAt} > ${t.createdAt}`,
    ),
  ],
);
