/**
 * `node --import tsx packages/service-bundles/src/bundle-of-main.ts <service>`: for
 * deploy/run-service.sh (when fresh-bundle-main.mjs found the bundle missing or stale) and the
 * image's build. Prints the path of the service's bundle, built
 * first if it is missing or stale; for the executor, also builds the task modules
 * `SLUICE_TASK_MODULES` names (its built-in ones unless set; package names are left to tsx), so
 * that an image whose files its services cannot write has them ready. Exits 64 for a name that is
 * no service, 1 when a build fails (esbuild's errors on stderr).
 */
import {
  BUILTIN_TASK_MODULE_FILE,
  SERVICES,
  builtTaskModules,
  bundledEntryOf,
  ensureServiceBundle,
  taskModuleFile,
} from './index.js';

const EXIT_USAGE = 64;

const service = process.argv[2] ?? '';
if (!SERVICES.has(service)) {
  process.stderr.write(`no service named '${service}' (one of ${[...SERVICES].join(', ')})\n`);
  process.exit(EXIT_USAGE);
}
await ensureServiceBundle(service);
if (service === 'executor') {
  const named = process.env['SLUICE_TASK_MODULES']?.split(',').map((m) => m.trim());
  const files = (named ?? [BUILTIN_TASK_MODULE_FILE]).flatMap((m) => taskModuleFile(m) ?? []);
  if (files.length > 0) await builtTaskModules(files);
}
process.stdout.write(`${bundledEntryOf(service)}\n`);
