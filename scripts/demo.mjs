#!/usr/bin/env node
/**
 * `npm run demo`: prepare (dependencies, NATS, Postgres), then run the demo (scripts/demo/main.ts),
 * which starts the services, creates a tenant, submits tasks and prints their progress.
 */
import { runEntry } from './lib/entry.mjs';

await runEntry('scripts/demo/main.ts', { needTestTools: false });
