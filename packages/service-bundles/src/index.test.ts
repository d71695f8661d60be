/**
 * The services' bundles: built from the workspace's sources, every other package imported from
 * where Node resolves it, `import.meta.url` kept per source file, only the services that may be
 * bundled, and stale once a file they were built from changes; and how a service is started
 * (`serviceNodeArgs`, and the bundle-of command deploy/run-service.sh asks). That a bundled
 * service runs and fails as its sources do is what every end-to-end test and
 * config-errors.test.ts check.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { before, describe, it } from 'node:test';
import { spawnSync } from 'node:child_process';
import {
  REPO_ROOT,
  SERVICES,
  bundledEntryOf,
  ensureServiceBundles,
  isFreshBundle,
  serviceNodeArgs,
} from './index.js';
import { mainBundlePath } from './bundle-files.mjs';
import { startupStubCode } from './startup-stub.js';

before(() => ensureServiceBundles());

describe('service bundles', () => {
  it('bundles every service, and nothing else', () => {
    assert.deepEqual([...SERVICES].sort(), ['executor', 'gateway', 'governor', 'scheduler']);
    assert.throws(() => bundledEntryOf('../services/gateway'), /no service named/);
  });

  for (const service of SERVICES) {
    it(`${service}: built from the workspace's sources and the lockfile`, () => {
      const entry = bundledEntryOf(service);
      assert.ok(entry.endsWith(`${service}.mjs`), entry);
      const inputs = Object.keys(
        (
          JSON.parse(readFileSync(entry.replace(/\.mjs$/, '.inputs.json'), 'utf8')) as {
            mtimes: Record<string, number>;
          }
        ).mtimes,
      );
      const relative = inputs.map((file) => path.relative(REPO_ROOT, file));
      assert.ok(relative.includes(`services/${service}/src/main.ts`));
      assert.ok(relative.includes('packages/runtime/src/run-service.ts'));
      assert.ok(relative.includes('pnpm-lock.yaml'));
      assert.ok(
        relative.every((file) => !file.includes('node_modules')),
        'no installed package is bundled',
      );
    });

    it(`${service}: imports packages by the file Node resolves, keeps each source's URL`, () => {
      const code = readFileSync(mainBundlePath(service), 'utf8');
      const specifiers = [...code.matchAll(/^import .* from "([^"]+)";$/gm)].map((m) => m[1]!);
      assert.ok(specifiers.length > 5, 'imports of its own');
      for (const specifier of specifiers) {
        assert.match(specifier, /^(node:[a-z_/]+|[a-z_]+|file:\/\/\/.*\/node_modules\/.*)$/);
      }
      assert.ok(
        specifiers.some((s) => s.includes('/node_modules/.pnpm/pino@')),
        'pino from its own folder',
      );
      assert.doesNotMatch(code, /import\.meta\.url/, "the bundle's own URL is never used");
    });
  }

  it("the gateway's descriptor set is read from where its source names it", () => {
    const code = readFileSync(mainBundlePath('gateway'), 'utf8');
    assert.ok(code.includes(`"file://${REPO_ROOT}/services/gateway/src/grpc/descriptor-set.ts"`));
  });

  it("starts a service from its startup module: the bundle's packages, source maps, the bundle", () => {
    assert.deepEqual(serviceNodeArgs('executor'), [bundledEntryOf('executor')]);
    for (const service of SERVICES) {
      const stub = readFileSync(bundledEntryOf(service), 'utf8');
      const bundle = readFileSync(mainBundlePath(service), 'utf8');
      // Every package the bundle imports statically (import statements span lines), in its order.
      const packages = [
        ...new Set(
          [...bundle.matchAll(/^import\s(?:[^;]*?\sfrom\s)?"(file:[^"]+)";$/gm)].map((m) => m[1]!),
        ),
      ];
      assert.ok(packages.length > 5, `${service} imports packages`);
      // Loaded only by a process that exports spans over OTLP (otlp-export.ts in telemetry).
      assert.ok(!packages.some((url) => url.includes('/exporter-trace-otlp')), 'no OTLP exporter');
      // Loaded only by an executor that must import a task module through it (task-registry.ts).
      assert.ok(!packages.some((url) => url.includes('/node_modules/tsx/')), 'no tsx');
      assert.equal(
        stub,
        startupStubCode(path.basename(mainBundlePath(service)), packages),
        `${service}'s startup module`,
      );
    }
  });

  it("the executor's built-in task module is named by its source, not bundled", () => {
    const entry = bundledEntryOf('executor');
    const code = readFileSync(mainBundlePath('executor'), 'utf8');
    assert.ok(code.includes(`"file://${REPO_ROOT}/services/executor/src/config.ts"`));
    const inputs = Object.keys(
      (
        JSON.parse(readFileSync(entry.replace(/\.mjs$/, '.inputs.json'), 'utf8')) as {
          mtimes: Record<string, number>;
        }
      ).mtimes,
    );
    assert.ok(inputs.some((file) => file.endsWith('services/executor/src/task-registry.ts')));
    assert.ok(
      inputs.every((file) => !file.includes('/builtin-tasks/')),
      'task modules are loaded at run time',
    );
  });

  it('bundle-of prints the bundle to run and refuses a non-service', () => {
    const bundleOf = (service: string) =>
      spawnSync(
        process.execPath,
        ['--import', 'tsx', 'packages/service-bundles/src/bundle-of-main.ts', service],
        { cwd: REPO_ROOT, encoding: 'utf8' },
      );
    const scheduler = bundleOf('scheduler');
    assert.equal(scheduler.status, 0, scheduler.stderr);
    assert.equal(scheduler.stdout, `${bundledEntryOf('scheduler')}\n`);
    const unknown = bundleOf('../../etc');
    assert.equal(unknown.status, 64);
    assert.equal(unknown.stdout, '');
    assert.match(unknown.stderr, /no service named '\.\.\/\.\.\/etc'/);
  });

  it('is stale once a file it was built from changes or goes, or its record is missing', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'sluice-bundle-test-'));
    try {
      const bundle = path.join(dir, 'x.mjs');
      const source = path.join(dir, 'x.ts');
      const inputs = path.join(dir, 'x.inputs.json');
      writeFileSync(bundle, '');
      writeFileSync(source, 'export {};');
      assert.equal(isFreshBundle(bundle, inputs), false, 'no record');
      writeFileSync(inputs, JSON.stringify({ mtimes: { [source]: statSync(source).mtimeMs } }));
      assert.equal(isFreshBundle(bundle, inputs), true, 'as built');
      utimesSync(source, new Date(), new Date(Date.now() + 5_000));
      assert.equal(isFreshBundle(bundle, inputs), false, 'a source changed');
      writeFileSync(inputs, JSON.stringify({ mtimes: { [source]: statSync(source).mtimeMs } }));
      assert.equal(isFreshBundle(bundle, inputs), true, 'rebuilt');
      rmSync(source);
      assert.equal(isFreshBundle(bundle, inputs), false, 'a source gone');
      rmSync(bundle);
      assert.equal(isFreshBundle(bundle, inputs), false, 'no bundle');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
