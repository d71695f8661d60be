/**
 * Entry point of the governor: `node --import tsx services/governor/src/main.ts`.
 */
import { runService } from '@sluice/runtime';
import { startGovernor } from './app.js';
import { loadGovernorConfig } from './config.js';

runService('governor', async () => startGovernor(loadGovernorConfig()));
