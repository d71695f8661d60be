/**
 * `@sluice/sdk/client` — call a Sluice gateway from TypeScript.
 *
 * @example
 * ```ts
 * import { createTaskClient } from '@sluice/sdk/client';
 * const client = createTaskClient({ address: '127.0.0.1:50051', apiKey: process.env.SLUICE_KEY! });
 * const { task } = await client.createTask({ type: 'research-brief', priority: 'PRIORITY_P1', input: { topic: 'queues', sourceUrl: 'https://example.com' } });
 * for await (const event of client.watchTask(task.task_id)) console.log(event.seq, event.type, event.to_status);
 * client.close();
 *
 * // With an admin key: tenants and their keys.
 * const admin = createAdminClient({ address: '127.0.0.1:50051', apiKey: process.env.SLUICE_ADMIN_KEY! });
 * const { secret } = await admin.createApiKey('acme');
 * admin.close();
 * ```
 */
export { createAdminClient } from './admin-client.js';
export type {
  AdminClient,
  AdminClientOptions,
  Breaker,
  GetPressureResponse,
  Override,
  OverrideParams,
  PressureDecision,
} from './admin-client.js';
export {
  DEFAULT_CALL_TIMEOUT_MS,
  DEFAULT_KEEPALIVE_TIME_MS,
  DEFAULT_KEEPALIVE_TIMEOUT_MS,
  isServiceError,
} from './connection.js';
export type { ClientOptions } from './connection.js';
export { createTaskClient } from './task-client.js';
export type {
  ApprovalDecision,
  CreateTaskParams,
  TaskClient,
  TaskClientOptions,
} from './task-client.js';
