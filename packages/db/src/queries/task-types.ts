/**
 * Task type manifests: registered by executors, read by the gateway (input schema) and the scheduler
 * (resources and policies of steps).
 */
import { and, eq, sql, type SQL } from 'drizzle-orm';
import type { Executor } from '../client.js';
import { recordOf } from '../raw-rows.js';
import { taskTypes, type ManifestStep } from '../schema.js';
import { textArrayOf } from './batch-input.js';

/** What a step does while its resource's circuit breaker is open (the SDK's `whileBreakerOpen`). */
export type WhileBreakerOpen = NonNullable<ManifestStep['whileBreakerOpen']>;

/** One step of a manifest as executors register it (kept in the `steps` jsonb). */
export type TaskTypeManifestStep = ManifestStep;

/** A task type as registered. */
export interface TaskTypeManifest {
  readonly name: string;
  readonly version: number;
  readonly description: string;
  readonly inputSchema: Record<string, unknown>;
  readonly firstStep: string;
  readonly steps: readonly TaskTypeManifestStep[];
}

/**
 * The step a task of this type starts with.
 *
 * @throws Error when the manifest names a first step it does not have (registration refuses such
 *   a manifest, so this is a bug).
 */
export function firstStepOf(taskType: TaskTypeManifest): TaskTypeManifestStep {
  const step = taskType.steps.find((s) => s.name === taskType.firstStep);
  if (!step) {
    throw new Error(
      `task type ${taskType.name} v${taskType.version} has no step ${taskType.firstStep}`,
    );
  }
  return step;
}

/**
 * Registers (or re-registers) a manifest. Re-registering the same name and version replaces its
 * contents: several executors register the same definitions at start.
 */
export async function registerTaskType(
  executor: Executor,
  manifest: TaskTypeManifest,
): Promise<void> {
  await executor
    .insert(taskTypes)
    .values({ ...manifest, steps: [...manifest.steps] })
    .onConflictDoUpdate({
      target: [taskTypes.name, taskTypes.version],
      set: {
        description: manifest.description,
        inputSchema: manifest.inputSchema,
        firstStep: manifest.firstStep,
        steps: [...manifest.steps],
        registeredAt: sql`now()`,
      },
    });
}

/** A manifest as read, with when it was registered. */
export interface RegisteredTaskType extends TaskTypeManifest {
  /**
   * `registered_at` as Postgres printed it (to the microsecond, which a `Date` is not): registering
   * the same version again moves it on, so it tells whether a remembered manifest is still current.
   */
  readonly registeredStamp: string;
}

/**
 * The newest registered version of each type named, by name; unknown names are left out. One
 * statement for several names: the gateway reads the types of concurrent creates together.
 */
export async function findLatestTaskTypes(
  executor: Executor,
  names: readonly string[],
): Promise<Map<string, RegisteredTaskType>> {
  const types = new Map<string, RegisteredTaskType>();
  if (names.length === 0) return types;
  const rows = await executor.execute<Record<string, unknown>>(latestTaskTypesStatement(names));
  for (const row of rows) {
    const type = recordOf(taskTypes, row);
    types.set(type.name, { ...type, registeredStamp: String(row['registered_stamp']) });
  }
  return types;
}

/** The read of {@link findLatestTaskTypes}. */
export function latestTaskTypesStatement(names: readonly string[]): SQL {
  // Written out rather than built: every create reads its type (see `keyOwnersStatement`).
  return sql`
    select distinct on (name) *, registered_at::text as registered_stamp from task_types
    where name = any(${textArrayOf(names)})
    order by name, version desc`;
}

/** One exact version of a type (what a task pinned), or `undefined`. */
export async function findTaskType(
  executor: Executor,
  name: string,
  version: number,
): Promise<TaskTypeManifest | undefined> {
  const rows = await executor
    .select()
    .from(taskTypes)
    .where(and(eq(taskTypes.name, name), eq(taskTypes.version, version)))
    .limit(1);
  return rows[0];
}
