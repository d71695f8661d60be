/**
 * Where the bundles of this checkout live, and whether a service's is up to date — in plain
 * JavaScript with nothing but Node's own modules, so that deploy/run-service.sh can ask at every
 * start without loading tsx (fresh-bundle-main.mjs): `node --import tsx` cost about 0.5
 * CPU-seconds of each deployed start just to learn that the bundle was fresh. The rest of the
 * package builds on the same paths and answers.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root, whose checkout a bundle belongs to. */
export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
/** Where the bundles are kept. */
export const BUNDLE_DIR = path.join(REPO_ROOT, 'node_modules', '.cache', 'sluice-services');
/** A change of installed packages moves what the bundles' imports point to. */
export const LOCKFILE = path.join(REPO_ROOT, 'pnpm-lock.yaml');

/** Every Sluice service: a folder under services/. */
export const SERVICES = new Set(['gateway', 'scheduler', 'governor', 'executor']);

/** What a service is started from: its startup module (startup-stub.ts), which imports the bundle. */
export const startupModulePath = (service) => path.join(BUNDLE_DIR, `${service}.mjs`);
/** The service's code, bundled. */
export const mainBundlePath = (service) => path.join(BUNDLE_DIR, `${service}.main.mjs`);
/** What the bundle was built from (`{ mtimes: { file: mtimeMs } }`). */
export const inputsPath = (service) => path.join(BUNDLE_DIR, `${service}.inputs.json`);

/**
 * Whether every file `inputs` records was last modified when it was built (a file gone: not).
 * @param {{ mtimes: Record<string, number> }} inputs
 */
export function inputsUnchanged(inputs) {
  return Object.entries(inputs.mtimes).every(([file, mtime]) => {
    try {
      return statSync(file).mtimeMs === mtime;
    } catch {
      return false;
    }
  });
}

/**
 * Whether `bundle` exists and every file `inputsFile` records was last modified when it was built
 * (a missing or unreadable record: not fresh).
 */
export function isFreshBundle(bundle, inputsFile) {
  let inputs;
  try {
    statSync(bundle);
    inputs = JSON.parse(readFileSync(inputsFile, 'utf8'));
  } catch {
    return false;
  }
  return inputsUnchanged(inputs);
}

/** Whether `service`'s bundle and startup module are there and as built from its sources. */
export function isFreshService(service) {
  if (!SERVICES.has(service)) return false;
  // The startup module too: a cache from before there was one holds only the bundle.
  return (
    isFreshBundle(mainBundlePath(service), inputsPath(service)) &&
    existsSync(startupModulePath(service))
  );
}
