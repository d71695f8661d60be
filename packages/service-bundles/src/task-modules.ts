/**
 * An executor's task modules (`SLUICE_TASK_MODULES`) as plain JavaScript, so that an executor
 * loads them without tsx: about a second less CPU at every start, and no tsx loader thread or
 * esbuild process beside it for as long as it runs.
 *
 * The files named are built together, one entry each, with what they import compiled in as the
 * services' bundles are (esbuild-setup.ts; `@sluice/sdk` too, their own copy, which the SDK allows:
 * the executor recognises definitions, results and errors by their fields). Modules two of them
 * share go into a common chunk, so each is still one instance. The build is kept in the checkout's
 * bundle cache under a key of the files' paths, with a record of its inputs, and made again when
 * one of them changed. Each build goes to a folder of its own, named in the record, so a build
 * never replaces files another process may be importing.
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { BUNDLE_DIR, REPO_ROOT, inputsUnchanged, type BundleInputs } from './bundle-files.mjs';
import { runBuild } from './esbuild-setup.js';

const TASK_BUNDLE_DIR = path.join(BUNDLE_DIR, 'task-modules');

/** The executor's built-in task types, its task modules unless `SLUICE_TASK_MODULES` names others. */
export const BUILTIN_TASK_MODULE_FILE = path.join(
  REPO_ROOT,
  'services',
  'executor',
  'src',
  'builtin-tasks',
  'index.ts',
);

/**
 * The file a task module specifier names (a path, relative to the working directory or absolute,
 * or a file URL), or undefined for a package name.
 */
export function taskModuleFile(specifier: string): string | undefined {
  if (specifier.startsWith('file:')) return fileURLToPath(specifier);
  if (specifier.startsWith('.') || path.isAbsolute(specifier)) return path.resolve(specifier);
  return undefined;
}
/** Builds of a key older than this, other than the current one, are removed by the next build. */
const OLD_BUILD_MS = 10 * 60_000;

/** A build's record: its inputs, its folder, and the module each file became. */
interface TaskBuild extends BundleInputs {
  readonly folder: string;
  /** Absolute path of each task module file → its built module, relative to the folder. */
  readonly modules: Record<string, string>;
}

/**
 * The URL to import for each of `files` (absolute paths of task modules, TypeScript or
 * JavaScript), in their order: built first if there is no build of them yet or one of its inputs
 * changed.
 */
export async function builtTaskModules(files: readonly string[]): Promise<string[]> {
  const key = createHash('sha256').update(JSON.stringify(files)).digest('hex').slice(0, 16);
  const current = freshBuild(key) ?? (await buildTaskModules(key, files));
  return files.map((file) => {
    const module = current.modules[file];
    if (module === undefined) throw new Error(`the build of ${key} has no module for ${file}`);
    return pathToFileURL(path.join(TASK_BUNDLE_DIR, key, current.folder, module)).href;
  });
}

const recordPath = (key: string) => path.join(TASK_BUNDLE_DIR, `${key}.json`);

function freshBuild(key: string): TaskBuild | undefined {
  try {
    const record = JSON.parse(readFileSync(recordPath(key), 'utf8')) as TaskBuild;
    const there = existsSync(path.join(TASK_BUNDLE_DIR, key, record.folder));
    return there && inputsUnchanged(record) ? record : undefined;
  } catch {
    return undefined;
  }
}

async function buildTaskModules(key: string, files: readonly string[]): Promise<TaskBuild> {
  const keyDir = path.join(TASK_BUNDLE_DIR, key);
  const folder = `${Date.now()}-${randomBytes(4).toString('hex')}`;
  const outdir = path.join(keyDir, folder);
  await mkdir(outdir, { recursive: true });
  const { metafile, inputs } = await runBuild({
    entryPoints: [...files],
    outdir,
    // A module two task modules import stays one instance: it goes into a chunk both import.
    splitting: true,
    entryNames: '[name]-[hash]',
    chunkNames: 'chunk-[hash]',
    outExtension: { '.js': '.mjs' },
  }).catch(async (error: unknown) => {
    await rm(outdir, { recursive: true, force: true });
    throw error;
  });
  const modules: Record<string, string> = {};
  for (const [output, meta] of Object.entries(metafile.outputs)) {
    if (meta.entryPoint !== undefined) {
      modules[path.resolve(meta.entryPoint)] = path.relative(outdir, path.resolve(output));
    }
  }
  const record: TaskBuild = { ...inputs, folder, modules };
  // Written beside and renamed over the record: a reader sees the old build or the new, whole.
  const temporary = `${recordPath(key)}.${randomBytes(4).toString('hex')}`;
  await writeFile(temporary, JSON.stringify(record));
  await rename(temporary, recordPath(key));
  await removeOldBuilds(keyDir, folder);
  return record;
}

/** Builds a process may no longer be importing from: older than a start takes, many times over. */
async function removeOldBuilds(keyDir: string, keep: string): Promise<void> {
  for (const entry of await readdir(keyDir)) {
    if (entry === keep) continue;
    const folder = path.join(keyDir, entry);
    const { mtimeMs } = await stat(folder);
    if (Date.now() - mtimeMs > OLD_BUILD_MS) await rm(folder, { recursive: true, force: true });
  }
}
