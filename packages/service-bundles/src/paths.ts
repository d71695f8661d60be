/** Where the bundles of this checkout live. */
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root, whose checkout a bundle belongs to. */
export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
/** Where the bundles are kept. */
export const BUNDLE_DIR = path.join(REPO_ROOT, 'node_modules', '.cache', 'sluice-services');
/** A change of installed packages moves what the bundles' imports point to. */
export const LOCKFILE = path.join(REPO_ROOT, 'pnpm-lock.yaml');
