/**
 * `node packages/service-bundles/src/fresh-bundle-main.mjs <service>`: deploy/run-service.sh's
 * first question at every start. Prints the service's startup module and exits 0 when its bundle
 * is there and up to date; exits 1, printing nothing, when it is missing or stale, or the name is
 * no service — then run-service.sh asks bundle-of (through tsx), which builds the bundle or says
 * what is wrong. Plain JavaScript, so a start with a fresh bundle does not load tsx.
 */
import { isFreshService, startupModulePath } from './bundle-files.mjs';

const service = process.argv[2] ?? '';
// False for a name that is no service, too.
if (isFreshService(service)) {
  process.stdout.write(`${startupModulePath(service)}\n`);
} else {
  process.exitCode = 1;
}
