/**
 * A service's startup module: the packages load without their source maps being read, the bundle
 * with its own, so that a stack trace from the bundle names its TypeScript.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { build } from 'esbuild';
import { startupStubCode, staticPackageImports } from './startup-stub.js';

let dir: string;

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'sluice-startup-stub-'));
  // A "package" that names a source map, as most installed packages do.
  writeFileSync(
    path.join(dir, 'package.mjs'),
    'export const loaded = true;\n//# sourceMappingURL=package.mjs.map\n',
  );
  writeFileSync(
    path.join(dir, 'package.mjs.map'),
    JSON.stringify({ version: 3, sources: ['package.ts'], names: [], mappings: 'AAAA' }),
  );
  // The "service": TypeScript, bundled with a linked map, importing the package.
  writeFileSync(
    path.join(dir, 'service.ts'),
    [
      "import { findSourceMap } from 'node:module';",
      "import { loaded } from './package.mjs';",
      'const maps = {',
      `  package: findSourceMap(${JSON.stringify(pathToFileURL(path.join(dir, 'package.mjs')).href)}) !== undefined,`,
      "  service: findSourceMap(new URL('./service.main.mjs', import.meta.url).href) !== undefined,",
      '};',
      'console.log(JSON.stringify({ loaded, maps }));',
      "const failure: Error = new Error('thrown in the service');",
      'throw failure;',
      '',
    ].join('\n'),
  );
  await build({
    entryPoints: [path.join(dir, 'service.ts')],
    outfile: path.join(dir, 'service.main.mjs'),
    bundle: true,
    format: 'esm',
    platform: 'node',
    sourcemap: 'linked',
    external: ['./package.mjs'],
    logLevel: 'silent',
  });
  writeFileSync(
    path.join(dir, 'service.mjs'),
    startupStubCode('service.main.mjs', [pathToFileURL(path.join(dir, 'package.mjs')).href]),
  );
});

after(() => rmSync(dir, { recursive: true, force: true }));

describe('the startup module', () => {
  it("reads the service's source map and not the packages'", () => {
    const run = spawnSync(process.execPath, [path.join(dir, 'service.mjs')], { encoding: 'utf8' });
    assert.equal(run.status, 1, run.stderr);
    const printed = JSON.parse(run.stdout) as { loaded: boolean; maps: Record<string, boolean> };
    assert.deepEqual(printed, { loaded: true, maps: { package: false, service: true } });
    // The stack names the TypeScript line that made the error (line 8 of service.ts).
    assert.match(run.stderr, /at .*service\.ts:8:\d+/);
  });

  it('started with --enable-source-maps instead, reads both (what it saves)', () => {
    const run = spawnSync(
      process.execPath,
      ['--enable-source-maps', path.join(dir, 'service.main.mjs')],
      { encoding: 'utf8' },
    );
    const printed = JSON.parse(run.stdout) as { maps: Record<string, boolean> };
    assert.deepEqual(printed.maps, { package: true, service: true });
  });

  it('refuses a bundle name that is not a file beside it', () => {
    assert.throws(() => startupStubCode('../x.mjs', []), /a bundle's file name/);
    assert.throws(() => startupStubCode('x.js', []), /a bundle's file name/);
  });
});

describe('staticPackageImports', () => {
  it('keeps the installed packages a bundle imports statically, in its order, once each', () => {
    assert.deepEqual(
      staticPackageImports([
        { path: 'file:///n/b.js', kind: 'import-statement', external: true },
        { path: 'node:fs', kind: 'import-statement', external: true },
        { path: 'file:///n/a.js', kind: 'import-statement', external: true },
        { path: 'file:///n/lazy.js', kind: 'dynamic-import', external: true },
        { path: 'services/x/src/y.ts', kind: 'import-statement' },
        { path: 'file:///n/b.js', kind: 'import-statement', external: true },
      ]),
      ['file:///n/b.js', 'file:///n/a.js'],
    );
  });
});
