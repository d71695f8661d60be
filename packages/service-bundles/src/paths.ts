/** Where the bundles of this checkout live (bundle-files.mjs has the roots, in plain JavaScript). */
import path from 'node:path';
import { REPO_ROOT } from './bundle-files.mjs';

export { BUNDLE_DIR, REPO_ROOT } from './bundle-files.mjs';
/** A change of installed packages moves what the bundles' imports point to. */
export const LOCKFILE = path.join(REPO_ROOT, 'pnpm-lock.yaml');
