#!/usr/bin/env node
// The `sluice` command. The CLI is TypeScript run through tsx (no build step, unlike the services,
// which run from bundles: packages/service-bundles): register tsx's loader in this process, then
// hand over to src/main.ts.
import { register } from 'tsx/esm/api';

register();
const { exitQuietlyOnClosedOutput, runCli } = await import('../src/main.ts');
exitQuietlyOnClosedOutput();
process.exitCode = await runCli(process.argv.slice(2));
