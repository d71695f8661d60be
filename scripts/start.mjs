#!/usr/bin/env node
/**
 * `npm start`: prepare (dependencies, NATS, Postgres), then run the whole stack in the foreground
 * (scripts/start/main.ts) until Ctrl-C. Extra arguments are passed on.
 */
import { runEntry } from './lib/entry.mjs';

await runEntry('scripts/start/main.ts', { needTestTools: false });
