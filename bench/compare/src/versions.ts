/** Versions of the client libraries under test, as installed for this package. */
import { readFile } from 'node:fs/promises';

const NODE_MODULES = new URL('../node_modules/', import.meta.url);

/** The `version` of an installed dependency of @sluice/bench-compare, or `unknown`. */
export async function packageVersion(name: string): Promise<string> {
  try {
    const text = await readFile(new URL(`${name}/package.json`, NODE_MODULES), 'utf8');
    const parsed = JSON.parse(text) as { version?: unknown };
    return typeof parsed.version === 'string' ? parsed.version : 'unknown';
  } catch {
    return 'unknown';
  }
}
