/**
 * Entry point of the gateway: `tsx services/gateway/src/main.ts`.
 */
import { runService } from '@sluice/runtime';
import { startGateway } from './app.js';
import { loadGatewayConfig } from './config.js';

runService('gateway', async () => startGateway(loadGatewayConfig()));
