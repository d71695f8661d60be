/**
 * `node --import tsx packages/service-bundles/src/bundle-of-main.ts <service>`: for
 * deploy/run-service.sh. Prints the path of the service's bundle, built first if it is missing or
 * stale; prints nothing for a service that runs from its sources (the executor). Exits 64 for a
 * name that is no service, 1 when the build fails (esbuild's errors on stderr).
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { BUNDLED_SERVICES, bundledEntryOf, ensureServiceBundle, REPO_ROOT } from './index.js';

const EXIT_USAGE = 64;

/** A folder name under services/, never a path. */
const SERVICE_NAME = /^[a-z][a-z0-9-]*$/;

const service = process.argv[2];
if (
  service === undefined ||
  !SERVICE_NAME.test(service) ||
  !existsSync(path.join(REPO_ROOT, 'services', service, 'src', 'main.ts'))
) {
  process.stderr.write(`bundle-of: no service named '${service ?? ''}'\n`);
  process.exit(EXIT_USAGE);
}
if (BUNDLED_SERVICES.has(service)) {
  await ensureServiceBundle(service);
  process.stdout.write(`${bundledEntryOf(service)}\n`);
}
