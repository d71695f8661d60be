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
 * ```
 */
export { createTaskClient } from './task-client.js';
export type { CreateTaskParams, TaskClient, TaskClientOptions } from './task-client.js';
