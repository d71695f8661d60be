/**
 * Task modules built into JavaScript for an executor: importable without tsx, in the order named,
 * a module two of them share still one instance, and built again only when an input changed.
 * (That an executor runs its task modules so is what every end-to-end test checks.)
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { builtTaskModules } from './task-modules.js';

const dir = mkdtempSync(path.join(tmpdir(), 'sluice-task-modules-test-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const file = (name: string, text: string) => {
  const full = path.join(dir, name);
  writeFileSync(full, text);
  return full;
};

describe('task modules built for an executor', () => {
  const shared = file(
    'shared.ts',
    'export const counter: { loaded: number } = { loaded: 0 };\ncounter.loaded += 1;\n',
  );
  const first = file(
    'first.ts',
    "import { counter } from './shared.js';\nexport const name: string = 'first';\nexport { counter };\n",
  );
  const second = file(
    'second.mts',
    "import { counter } from './shared.js';\nexport const name: string = 'second';\nexport const url: string = import.meta.url;\nexport { counter };\n",
  );

  it('gives one importable JavaScript module per file, in order, sharing what they share', async () => {
    const urls = await builtTaskModules([second, first]);
    assert.equal(urls.length, 2);
    for (const url of urls) assert.match(url, /^file:\/\/.*\.mjs$/);
    const [b, a] = (await Promise.all(urls.map((url) => import(url)))) as [
      { name: string; url: string; counter: { loaded: number } },
      { name: string; counter: { loaded: number } },
    ];
    assert.equal(a.name, 'first');
    assert.equal(b.name, 'second');
    assert.equal(a.counter, b.counter, 'the shared module is one instance');
    assert.equal(a.counter.loaded, 1);
    assert.equal(b.url, `file://${second}`, "import.meta.url is the source file's");
  });

  it('reuses the build while its inputs are unchanged, and builds again when one changes', async () => {
    const built = await builtTaskModules([second, first]);
    assert.deepEqual(await builtTaskModules([second, first]), built);
    writeFileSync(shared, 'export const counter = { loaded: 10 };\n');
    utimesSync(shared, new Date(), new Date(Date.now() + 5_000));
    const rebuilt = await builtTaskModules([second, first]);
    assert.notDeepEqual(rebuilt, built);
    const module = (await import(rebuilt[1]!)) as { counter: { loaded: number } };
    assert.equal(module.counter.loaded, 10);
  });

  it('fails a build whose module does not compile, naming the file', async () => {
    const broken = file('broken.ts', 'export const = ;\n');
    await assert.rejects(builtTaskModules([broken]), /broken\.ts/);
  });
});
