/**
 * Which executors `npm start` runs: one per resource class that the configured task types use. The
 * types are those the executors load — the built-in samples, or the modules SLUICE_TASK_MODULES
 * names — so adding a task type on a new resource needs no change here.
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { isTaskDefinition } from '@sluice/sdk';

/** The executor's built-in task types: what executors load when SLUICE_TASK_MODULES is not set. */
const BUILTIN_TASK_MODULE = new URL(
  '../../services/executor/src/builtin-tasks/index.ts',
  import.meta.url,
).href;

/**
 * The resources of every step of every task type exported by the modules, sorted. The modules are
 * named as in SLUICE_TASK_MODULES (comma-separated; paths relative to the working directory, or
 * package names); `undefined` or blank means the built-in types.
 *
 * @throws Error naming the module that cannot be imported or exports no task definition.
 */
export async function resourcesOfTaskModules(taskModules: string | undefined): Promise<string[]> {
  const specifiers = (taskModules ?? '')
    .split(',')
    .map((m) => m.trim())
    .filter((m) => m.length > 0);
  const urls = specifiers.length > 0 ? specifiers.map(moduleUrl) : [BUILTIN_TASK_MODULE];
  const resources = new Set<string>();
  for (const [i, url] of urls.entries()) {
    const name = specifiers[i] ?? 'the built-in task types';
    let exports: Record<string, unknown>;
    try {
      exports = (await import(url)) as Record<string, unknown>;
    } catch (error) {
      throw new Error(`cannot load task module ${name}: ${String(error)}`, { cause: error });
    }
    const definitions = Object.values(exports).filter(isTaskDefinition);
    if (definitions.length === 0) throw new Error(`task module ${name} exports no task definition`);
    for (const definition of definitions) {
      for (const step of Object.values(definition.steps)) resources.add(step.resource);
    }
  }
  return [...resources].sort();
}

/** The import URL of a module specifier, resolved the way the executor resolves it. */
function moduleUrl(specifier: string): string {
  return specifier.startsWith('.') || path.isAbsolute(specifier)
    ? pathToFileURL(path.resolve(specifier)).href
    : specifier;
}
