/**
 * The task types an executor can run: loaded from modules named in configuration (the built-in
 * samples by default), so users ship their own task types without forking Sluice.
 */
import { existsSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { builtTaskModules, taskModuleFile } from '@sluice/service-bundles';
import type { TaskTypeManifest } from '@sluice/db';
import {
  DEFAULT_STEP_MAX_ATTEMPTS,
  DEFAULT_STEP_TIMEOUT_MS,
  isTaskDefinition,
  type StepDefinition,
  type TaskDefinition,
} from '@sluice/sdk';

/** The definitions an executor knows, by name and version. */
export interface TaskRegistry {
  readonly definitions: readonly TaskDefinition[];
  find(name: string, version: number): TaskDefinition | undefined;
  /** The steps of a definition, with defaults applied. */
  step(definition: TaskDefinition, name: string): StepDefinition<unknown> | undefined;
}

/** Builds a registry; two definitions with the same name and version are a configuration error. */
export function createTaskRegistry(definitions: readonly TaskDefinition[]): TaskRegistry {
  const byKey = new Map<string, TaskDefinition>();
  for (const definition of definitions) {
    const key = `${definition.name}@${definition.version}`;
    if (byKey.has(key)) throw new Error(`task type ${key} is defined twice`);
    byKey.set(key, definition);
  }
  return {
    definitions: [...byKey.values()],
    find: (name, version) => byKey.get(`${name}@${version}`),
    step: (definition, name) =>
      Object.hasOwn(definition.steps, name) ? definition.steps[name] : undefined,
  };
}

/** Where the executor says how its task modules load (its logger). */
export interface TaskModuleLog {
  info(fields: Record<string, unknown>, message: string): void;
}

/**
 * Imports each module (a path relative to the working directory, or a package name) and collects
 * every exported task definition. A module that exports none is an error: it is surely a typo.
 *
 * Task modules are TypeScript as often as not, and the executor itself runs from a bundle of
 * plain JavaScript (@sluice/service-bundles). Files are built into JavaScript too, kept in the
 * checkout's bundle cache (`builtTaskModules`); where that cache cannot be written (an image whose
 * files belong to another user, with modules its build did not prepare), and for package names,
 * a module is imported through tsx's `tsImport` instead, which costs about a second more CPU at
 * start. Either way a task module has its own copy of `@sluice/sdk` beside the executor's, which is
 * safe by design: the executor recognises definitions, results and errors by their fields, never
 * by `instanceof`.
 */
export async function loadTaskDefinitions(
  modules: readonly string[],
  log?: TaskModuleLog,
  options: LoadOptions = {},
): Promise<TaskDefinition[]> {
  const urls = await importableUrls(modules, log, options.build ?? builtTaskModules);
  const found: TaskDefinition[] = [];
  for (const [index, specifier] of modules.entries()) {
    const url = urls[index]!;
    const exports = (
      url.built ? await import(url.href) : await importThroughTsx(url.href)
    ) as Record<string, unknown>;
    const definitions = Object.values(exports).filter(isTaskDefinition);
    if (definitions.length === 0) throw new Error(`module ${specifier} exports no task definition`);
    found.push(...definitions);
  }
  return found;
}

/**
 * Imports a module through tsx (TypeScript, or a package name resolved as tsx does, from this
 * file). tsx is loaded only then: an executor whose task modules are built never needs it, and
 * loading its API cost ~80 ms of CPU at every start.
 */
async function importThroughTsx(href: string): Promise<unknown> {
  const { tsImport } = await import('tsx/esm/api');
  return tsImport(href, import.meta.url);
}

/** How {@link loadTaskDefinitions} builds the files (tests give a cache that cannot be written). */
export interface LoadOptions {
  /** Builds the files into JavaScript; the URL of each file's build, in order. */
  readonly build?: (files: readonly string[]) => Promise<string[]>;
}

/** What to import for a task module: a built one, or its source (or package) through tsx. */
interface TaskModuleUrl {
  readonly href: string;
  readonly built: boolean;
}

async function importableUrls(
  modules: readonly string[],
  log: TaskModuleLog | undefined,
  build: (files: readonly string[]) => Promise<string[]>,
): Promise<TaskModuleUrl[]> {
  const fileOf = new Map(modules.map((specifier) => [specifier, taskModuleFile(specifier)]));
  for (const [specifier, file] of fileOf) {
    if (file !== undefined && !existsSync(file)) {
      throw new Error(`task module ${specifier}: no such file (${file})`);
    }
  }
  const files = [...fileOf.values()].filter((file) => file !== undefined);
  const builtUrlOf = new Map<string, string>();
  if (files.length > 0) {
    try {
      const urls = await build(files);
      files.forEach((file, index) => builtUrlOf.set(file, urls[index]!));
    } catch (error) {
      if (!isUnwritable(error)) throw error;
      log?.info(
        { cache: (error as NodeJS.ErrnoException).path },
        'task modules load through tsx: the bundle cache cannot be written',
      );
    }
  }
  return modules.map((specifier) => {
    const file = fileOf.get(specifier);
    if (file === undefined) return { href: specifier, built: false };
    const built = builtUrlOf.get(file);
    return built === undefined
      ? { href: pathToFileURL(file).href, built: false }
      : { href: built, built: true };
  });
}

function isUnwritable(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return code === 'EACCES' || code === 'EPERM' || code === 'EROFS';
}

/** The manifest registered in Postgres for a definition. */
export function manifestOf(definition: TaskDefinition): TaskTypeManifest {
  return {
    name: definition.name,
    version: definition.version,
    description: definition.description,
    inputSchema: definition.inputJsonSchema,
    firstStep: definition.firstStep,
    steps: Object.entries(definition.steps).map(([name, step]) => ({
      name,
      resource: step.resource,
      timeoutMs: step.timeoutMs ?? DEFAULT_STEP_TIMEOUT_MS,
      maxAttempts: step.maxAttempts ?? DEFAULT_STEP_MAX_ATTEMPTS,
      ...(step.backoff === undefined ? {} : { backoff: { ...step.backoff } }),
      ...(step.repairStep === undefined ? {} : { repairStep: step.repairStep }),
      // Left out when not declared: absent reads as `wait`, as in manifests older than the field.
      ...(step.whileBreakerOpen === undefined ? {} : { whileBreakerOpen: step.whileBreakerOpen }),
    })),
  };
}

/** Whether any step of the definition runs on `resource`. */
export function usesResource(definition: TaskDefinition, resource: string): boolean {
  return Object.values(definition.steps).some((step) => step.resource === resource);
}
