/**
 * The task types an executor can run: loaded from modules named in configuration (the built-in
 * samples by default), so users ship their own task types without forking Sluice.
 */
import { pathToFileURL } from 'node:url';
import path from 'node:path';
import { tsImport } from 'tsx/esm/api';
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

/**
 * Imports each module (a path relative to the working directory, or a package name) and collects
 * every exported task definition. A module that exports none is an error: it is surely a typo.
 *
 * Task modules are TypeScript as often as not, and the executor itself runs from a bundle of
 * plain JavaScript (@sluice/service-bundles), so each is imported through tsx's `tsImport`: only
 * the task module and what it imports go through tsx's loader, not the executor's own modules.
 * They get their own copy of `@sluice/sdk`, which is safe by design: the executor recognises
 * definitions, results and errors by their fields, never by `instanceof`.
 */
export async function loadTaskDefinitions(modules: readonly string[]): Promise<TaskDefinition[]> {
  const found: TaskDefinition[] = [];
  for (const specifier of modules) {
    const url =
      specifier.startsWith('.') || path.isAbsolute(specifier)
        ? pathToFileURL(path.resolve(specifier)).href
        : specifier;
    const exports = (await tsImport(url, import.meta.url)) as Record<string, unknown>;
    const definitions = Object.values(exports).filter(isTaskDefinition);
    if (definitions.length === 0) throw new Error(`module ${specifier} exports no task definition`);
    found.push(...definitions);
  }
  return found;
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
