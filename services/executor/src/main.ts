/**
 * Entry point of an executor: `tsx services/executor/src/main.ts --resource llm`.
 */
import { runService } from '@sluice/runtime';
import { startExecutor } from './app.js';
import { loadExecutorConfig } from './config.js';

runService('executor', async () => startExecutor(loadExecutorConfig()));
