/**
 * The task type of the poison-message end-to-end test: its one step crashes the executor that runs
 * it (`process.exit`), every time, so the step message is never acknowledged and JetStream gives up
 * on it after `max_deliver` deliveries.
 */
import { z } from 'zod';
import { complete, defineTask } from '@sluice/sdk';

export const poisonCrash = defineTask({
  name: 'poison-crash',
  version: 1,
  description: 'A step that kills its executor (test type).',
  input: z.object({}),
  firstStep: 'crash',
  steps: {
    crash: { resource: 'tool:poison' },
  },
  handlers: {
    crash: () => {
      // No outcome, no acknowledgement: what a handler that crashes its process looks like.
      process.exit(1);
      return Promise.resolve(complete({}));
    },
  },
});
