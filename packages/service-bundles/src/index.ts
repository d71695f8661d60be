/**
 * How every Sluice service is started — by deploy/run-service.sh (and so the image and
 * `npm start`), the tests, the demo and the benchmarks alike: from a bundle of its TypeScript.
 *
 * A bundle is one ES module compiled from the workspace's own code (`@sluice/*` and the service)
 * by the esbuild tsx compiles with. A process started from it takes about half the CPU that
 * `node --import tsx` spends resolving and loading every module through tsx's loader thread, and
 * less memory: no loader thread, no esbuild service process beside it (the gateway, on a 2-core
 * machine: 1.4 CPU-s and 116 MB resident once started, against 2.8 s and 162 MB). An executor's
 * task modules, TypeScript as often as not, are built the same way when it starts
 * (task-modules.ts).
 *
 * Every other package stays a module of its own, imported by the absolute path Node itself would
 * resolve it to from the importing file (pnpm gives each package only its own dependencies, so a
 * bare name would not resolve from the bundle's folder) under Node's conditions, so what runs is
 * the package as published. `import.meta.url` stays each source file's own URL, so the paths built
 * from it (the protos, the migrations, the executor's built-in task module) are the ones the
 * sources name. A bundle is therefore tied to the checkout it was built in: it lives in that
 * checkout's `node_modules/.cache`.
 *
 * A bundle is rebuilt when any file it was built from (or the lockfile) changed since; a stale one
 * is never started (`bundledEntryOf` throws). See docs/decisions.md.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import {
  BUNDLE_DIR,
  REPO_ROOT,
  SERVICES,
  inputsPath,
  isFreshService,
  mainBundlePath,
  startupModulePath,
  type BundleInputs,
} from './bundle-files.mjs';
import { runBuild } from './esbuild-setup.js';
import { startupStubCode, staticPackageImports } from './startup-stub.js';

export { BUNDLE_DIR, REPO_ROOT, SERVICES, isFreshBundle } from './bundle-files.mjs';
export { BUILTIN_TASK_MODULE_FILE, builtTaskModules, taskModuleFile } from './task-modules.js';

/**
 * The bundle to start for `service`.
 *
 * @throws Error for a name that is no service, and when the bundle is missing or older than a
 *   file it was built from: call {@link ensureServiceBundles} first.
 */
export function bundledEntryOf(service: string): string {
  if (!SERVICES.has(service)) throw new Error(`no service named '${service}'`);
  if (!isFreshService(service)) {
    throw new Error(
      `the ${service} bundle is missing or stale: await ensureServiceBundles() (@sluice/service-bundles) before starting it`,
    );
  }
  return startupModulePath(service);
}

/**
 * The arguments for `node` that start `service` as deployed: its startup module, which turns
 * source maps on for the service's own code (so that stack traces name the TypeScript) but not for
 * the packages it loads (startup-stub.ts).
 *
 * @throws Error as {@link bundledEntryOf} does.
 */
export function serviceNodeArgs(service: string): string[] {
  return [bundledEntryOf(service)];
}

let ensuring: Promise<void> | undefined;

/** Builds the bundles that are missing or stale (one build at a time in a process). */
export function ensureServiceBundles(): Promise<void> {
  ensuring ??= (async () => {
    try {
      await Promise.all([...SERVICES].map((s) => ensureServiceBundle(s)));
    } finally {
      ensuring = undefined;
    }
  })();
  return ensuring;
}

/** Builds `service`'s bundle if it is missing or stale. */
export async function ensureServiceBundle(service: string): Promise<void> {
  if (!SERVICES.has(service)) throw new Error(`no service named '${service}'`);
  if (!isFreshService(service)) await buildBundle(service);
}

async function buildBundle(service: string): Promise<void> {
  await mkdir(BUNDLE_DIR, { recursive: true });
  // Written beside the bundle and renamed over it, so a process never starts a half-written one
  // (and two processes building at once each leave a whole one).
  const temporary = path.join(BUNDLE_DIR, `.${service}-${randomBytes(4).toString('hex')}.mjs`);
  const { metafile, inputs } = await runBuild({
    entryPoints: [path.join(REPO_ROOT, 'services', service, 'src', 'main.ts')],
    outfile: temporary,
  });
  const map = `${temporary}.map`;
  const main = mainBundlePath(service);
  // The bundle names its map by file name: keep it beside the bundle under the final name.
  const code = (await readFile(temporary, 'utf8')).replace(
    `//# sourceMappingURL=${path.basename(map)}`,
    `//# sourceMappingURL=${path.basename(main)}.map`,
  );
  await writeFile(temporary, code);
  const output = metafile.outputs[path.relative(process.cwd(), temporary)];
  if (output === undefined) throw new Error(`esbuild's metafile has no output ${temporary}`);
  const stub = `${temporary}.start.mjs`;
  await writeFile(stub, startupStubCode(path.basename(main), staticPackageImports(output.imports)));
  await rename(map, `${main}.map`);
  await rename(temporary, main);
  await rename(stub, startupModulePath(service));
  await writeFile(inputsPath(service), JSON.stringify(inputs satisfies BundleInputs));
}
