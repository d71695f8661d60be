/**
 * Entry point of the scheduler: `tsx services/scheduler/src/main.ts`.
 */
import { runService } from '@sluice/runtime';
import { startScheduler } from './app.js';
import { loadSchedulerConfig } from './config.js';

runService('scheduler', async () => startScheduler(loadSchedulerConfig()));
