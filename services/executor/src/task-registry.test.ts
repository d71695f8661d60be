/**
 * Loading task modules: built into JavaScript and imported, definitions collected in the order
 * named; imported from their TypeScript through tsx where the build cache cannot be written; a
 * missing file or a module without definitions refused with a message naming it.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { BUILTIN_TASK_MODULE } from './config.js';
import { loadTaskDefinitions } from './task-registry.js';

const dir = mkdtempSync(path.join(tmpdir(), 'sluice-task-registry-test-'));
after(() => rmSync(dir, { recursive: true, force: true }));

describe('loadTaskDefinitions', () => {
  it('loads the built-in task types from their TypeScript module', async () => {
    const lines: string[] = [];
    const definitions = await loadTaskDefinitions([BUILTIN_TASK_MODULE], {
      info: (_fields, message) => void lines.push(message),
    });
    const names = definitions.map((d) => `${d.name}@${d.version}`);
    assert.ok(names.includes('research-brief@1'), names.join(', '));
    assert.ok(names.includes('document-ingestion@1'), names.join(', '));
    assert.deepEqual(lines, [], 'built, not loaded through tsx');
  });

  it('imports the modules through tsx, saying so, where the build cache cannot be written', async () => {
    const lines: { fields: Record<string, unknown>; message: string }[] = [];
    const cache = '/var/cache/sluice-services/task-modules';
    const definitions = await loadTaskDefinitions(
      [BUILTIN_TASK_MODULE],
      { info: (fields, message) => void lines.push({ fields, message }) },
      { build: () => Promise.reject(unwritable('EACCES', cache)) },
    );
    const names = definitions.map((d) => `${d.name}@${d.version}`);
    assert.ok(names.includes('research-brief@1'), names.join(', '));
    assert.deepEqual(lines, [
      {
        fields: { cache },
        message: 'task modules load through tsx: the bundle cache cannot be written',
      },
    ]);
  });

  it('fails with any other error of the build (a module that does not compile)', async () => {
    const broken = new Error('Build failed with 1 error: tasks.ts:1:7: ERROR: Expected ";"');
    await assert.rejects(
      loadTaskDefinitions([BUILTIN_TASK_MODULE], undefined, {
        build: () => Promise.reject(broken),
      }),
      (error) => error === broken,
    );
  });

  it('refuses a file that does not exist, naming it', async () => {
    await assert.rejects(
      loadTaskDefinitions(['./no/such/tasks.ts']),
      /task module \.\/no\/such\/tasks\.ts: no such file/,
    );
  });

  it('refuses a module that exports no task definition', async () => {
    const file = path.join(dir, 'nothing.ts');
    writeFileSync(file, 'export const answer: number = 42;\n');
    await assert.rejects(loadTaskDefinitions([file]), /exports no task definition/);
  });
});

/** The error a write into `where` fails with when the process may not write there. */
function unwritable(code: 'EACCES' | 'EROFS', where: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`${code}: permission denied, mkdir '${where}'`), {
    code,
    path: where,
  });
}
