/**
 * Task types the db and service tests create tasks of, so each test file does not spell out its
 * own copy of the same manifest.
 */
import type { TaskTypeManifest } from '../queries/task-types.js';

/** What a test may change of {@link oneStepManifest}'s type. */
export interface OneStepOptions {
  /** The step's resource (default `llm`). */
  readonly resource?: string;
  /** The type's name (default `one-step`). */
  readonly name?: string;
  /** Attempts of the step (default 1). */
  readonly maxAttempts?: number;
}

/** A type of one step, `only` (a second's timeout, any object input). */
export function oneStepManifest(options: OneStepOptions = {}): TaskTypeManifest {
  const { resource = 'llm', name = 'one-step', maxAttempts = 1 } = options;
  return {
    name,
    version: 1,
    description: '',
    inputSchema: { type: 'object' },
    firstStep: 'only',
    steps: [{ name: 'only', resource, timeoutMs: 1000, maxAttempts }],
  };
}
