/** Paths inside the repository, independent of the directory the scripts are started from. */
import { fileURLToPath } from 'node:url';
import path from 'node:path';

/** Absolute path of the repository root (two levels above this file). */
export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/** Absolute path of a tool installed in the root `node_modules/.bin`. */
export function localBin(name) {
  return path.join(repoRoot, 'node_modules', '.bin', name);
}

/** The PATH for child processes: the root `node_modules/.bin` first, like `npm run` does. */
export function pathWithLocalBin(currentPath = process.env.PATH ?? '') {
  const bin = path.join(repoRoot, 'node_modules', '.bin');
  return currentPath ? `${bin}${path.delimiter}${currentPath}` : bin;
}
