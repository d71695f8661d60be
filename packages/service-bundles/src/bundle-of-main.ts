/**
 * `node --import tsx packages/service-bundles/src/bundle-of-main.ts <service>`: for
 * deploy/run-service.sh. Prints the path of the service's bundle, built first if it is missing or
 * stale. Exits 64 for a name that is no service, 1 when the build fails (esbuild's errors on
 * stderr).
 */
import { SERVICES, bundledEntryOf, ensureServiceBundle } from './index.js';

const EXIT_USAGE = 64;

const service = process.argv[2] ?? '';
if (!SERVICES.has(service)) {
  process.stderr.write(`no service named '${service}' (one of ${[...SERVICES].join(', ')})\n`);
  process.exit(EXIT_USAGE);
}
await ensureServiceBundle(service);
process.stdout.write(`${bundledEntryOf(service)}\n`);
