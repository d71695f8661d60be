/**
 * The set-up most db tests share: a fresh migrated database (cloned from the run's template), a
 * pool on it, some tenants and the task types the test creates tasks of.
 */
import { openDatabase, type DatabaseHandle } from '../client.js';
import { migrateDatabase } from '../migrate.js';
import { registerTaskType, type TaskTypeManifest } from '../queries/task-types.js';
import { createTenant } from '../queries/tenants.js';
import { createTestDatabase, migratedTemplate, type TestDatabase } from './test-database.js';

/** Options of {@link openTaskTypeDatabase}. */
export interface TaskTypeDatabaseOptions {
  /** Tenant ids to create (each tenant's name is its id). */
  readonly tenants: readonly string[];
  /** Task types to register. */
  readonly manifests: readonly TaskTypeManifest[];
  /** Connections of the pool; default 8. */
  readonly max?: number;
}

/** What {@link openTaskTypeDatabase} made; `close()` ends the pool and drops the database. */
export interface TaskTypeDatabase {
  readonly database: TestDatabase;
  readonly handle: DatabaseHandle;
  close(): Promise<void>;
}

export async function openTaskTypeDatabase(
  options: TaskTypeDatabaseOptions,
): Promise<TaskTypeDatabase> {
  const database = await createTestDatabase({ template: await migratedTemplate(migrateDatabase) });
  const handle = openDatabase(database.url, { max: options.max ?? 8 });
  const close = async () => {
    await handle.close();
    await database.drop();
  };
  try {
    for (const id of options.tenants) await createTenant(handle.db, { id });
    for (const manifest of options.manifests) await registerTaskType(handle.db, manifest);
  } catch (error) {
    await close();
    throw error;
  }
  return { database, handle, close };
}
