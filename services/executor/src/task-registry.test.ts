/**
 * Loading task modules: built into JavaScript and imported, definitions collected in the order
 * named; a missing file or a module without definitions refused with a message naming it.
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
