/**
 * `@sluice/db/testing` — fixtures for tests that need PostgreSQL: a fresh database per test (cloned
 * from a migrated template for speed) on the run's server, and private clusters for fault tests.
 *
 * @example
 * ```ts
 * const template = await migratedTemplate(migrateDatabase);
 * await using db = await createTestDatabase({ template });
 * const handle = openDatabase(db.url);
 * ```
 */
export { adminDatabaseUrl, databaseUrlFor } from './admin-url.js';
export { createTestDatabase, migratedTemplate } from './test-database.js';
export type {
  CreateTestDatabaseOptions,
  MigratedTemplateOptions,
  TestDatabase,
} from './test-database.js';
export { startPostgresServer } from './postgres-server.js';
export { oneStepManifest } from './manifests.js';
export { markTaskFinished, waitForLockWaiter } from './task-rows.js';
export { createQueuedTasks } from './queued-tasks.js';
export { eventsAsWritten } from './twin-tasks.js';
export { openTaskTypeDatabase } from './task-type-database.js';
export {
  describeTurn,
  preparesStatement,
  startTurnCounter,
  type ConnectionTurn,
  type TurnCounter,
} from './turn-counter.js';
export { withinSeconds } from './within-seconds.js';
export type { TaskTypeDatabase, TaskTypeDatabaseOptions } from './task-type-database.js';
export type { PostgresServer, StartPostgresServerOptions } from './postgres-server.js';
