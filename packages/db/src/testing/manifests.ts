/**
 * Task types the db and service tests create tasks of, so each test file does not spell out its
 * own copy of the same manifest.
 */
import type { TaskTypeManifest } from '../queries/task-types.js';

/** A type of one step, `only`, on `resource` (one attempt, a second's timeout, any object input). */
export function oneStepManifest(resource = 'llm', name = 'one-step'): TaskTypeManifest {
  return {
    name,
    version: 1,
    description: '',
    inputSchema: { type: 'object' },
    firstStep: 'only',
    steps: [{ name: 'only', resource, timeoutMs: 1000, maxAttempts: 1 }],
  };
}
