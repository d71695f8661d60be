/** Types of bundle-files.mjs. */

export const REPO_ROOT: string;
export const BUNDLE_DIR: string;
export const LOCKFILE: string;
export const SERVICES: ReadonlySet<string>;

export function startupModulePath(service: string): string;
export function mainBundlePath(service: string): string;
export function inputsPath(service: string): string;

/** What a bundle was built from: each input file and its modification time. */
export interface BundleInputs {
  readonly mtimes: Record<string, number>;
}

export function inputsUnchanged(inputs: BundleInputs): boolean;
export function isFreshBundle(bundle: string, inputsFile: string): boolean;
export function isFreshService(service: string): boolean;
