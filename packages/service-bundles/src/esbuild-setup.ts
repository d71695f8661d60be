/**
 * What every bundle here is built with: Node's own resolution, the workspace's TypeScript compiled
 * in, every other package imported at run time from the file Node resolves it to, and
 * `import.meta.url` kept per source file (see index.ts for why).
 */
import { readFile } from 'node:fs/promises';
import { statSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { BuildOptions, Loader, Metafile, Plugin } from 'esbuild';
import { LOCKFILE, type BundleInputs } from './bundle-files.mjs';

/** Options shared by the services' bundles and the task modules' ones. */
const COMMON_BUILD_OPTIONS = {
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  // Node's own resolution: `main` and the `node`/`import`/`require` conditions, not the `module`
  // builds meant for bundlers.
  mainFields: ['main'],
  conditions: ['node'],
  sourcemap: 'linked',
  metafile: true,
  logLevel: 'warning',
} as const satisfies BuildOptions;

/** A finished build: what esbuild wrote, and what it was built from. */
export interface Build {
  readonly metafile: Metafile;
  readonly inputs: BundleInputs;
}

/**
 * Builds `options` (entry points, output) with what every bundle here is built with. esbuild is
 * loaded on the first build, so a process that finds its bundles fresh (an executor, at every
 * start) never loads it.
 */
export async function runBuild(options: BuildOptions): Promise<Build> {
  const { build } = await import('esbuild');
  const startedMs = Date.now();
  const { metafile } = await build({
    ...COMMON_BUILD_OPTIONS,
    plugins: [externalPackages, ownFileUrls],
    ...options,
  });
  if (metafile === undefined) throw new Error('esbuild returned no metafile');
  return { metafile, inputs: inputsOf(metafile, startedMs) };
}

/**
 * The inputs of a build that began at `startedMs`, and the lockfile (a change of installed
 * packages moves what a bundle's imports point to). A file changed while the build read it may be
 * in the bundle as it was: recorded as never matching, so the next check builds again.
 */
function inputsOf(metafile: Metafile, startedMs: number): BundleInputs {
  const files = [...Object.keys(metafile.inputs).map((file) => path.resolve(file)), LOCKFILE];
  return {
    mtimes: Object.fromEntries(
      files.map((file) => {
        const { mtimeMs } = statSync(file);
        return [file, mtimeMs < startedMs ? mtimeMs : -1];
      }),
    ),
  };
}

/**
 * Packages are imported at run time, from the file Node would find them in; a package whose file is
 * TypeScript (the workspace's own, `@sluice/*` among them) is compiled in, as Node cannot load it.
 */
const externalPackages: Plugin = {
  name: 'external-packages',
  setup(build) {
    build.onResolve({ filter: /^[^./]/ }, async (args) => {
      const pluginData = args.pluginData as { resolving?: boolean } | undefined;
      if (pluginData?.resolving || args.path.startsWith('@sluice/')) return undefined;
      if (args.path.startsWith('node:')) return { path: args.path, external: true };
      const found = await build.resolve(args.path, {
        kind: args.kind,
        importer: args.importer,
        resolveDir: args.resolveDir,
        pluginData: { resolving: true },
      });
      if (found.errors.length > 0) return { errors: found.errors };
      // A Node built-in named without `node:` resolves to itself.
      if (found.external) return { path: found.path, external: true };
      if (TYPESCRIPT_FILE.test(found.path)) return { path: found.path };
      return { path: pathToFileURL(found.path).href, external: true };
    });
  },
};

const TYPESCRIPT_FILE = /\.[cm]?tsx?$/;

/** `import.meta.url` in a bundled source file: that file's URL, not the bundle's. */
const ownFileUrls: Plugin = {
  name: 'own-file-urls',
  setup(build) {
    build.onLoad({ filter: /\.[cm]?[jt]sx?$/ }, async (args) => ({
      contents: (await readFile(args.path, 'utf8')).replaceAll(
        'import.meta.url',
        JSON.stringify(pathToFileURL(args.path).href),
      ),
      loader: loaderOf(args.path),
    }));
  },
};

function loaderOf(file: string): Loader {
  const typescript = TYPESCRIPT_FILE.test(file);
  if (file.endsWith('x')) return typescript ? 'tsx' : 'jsx';
  return typescript ? 'ts' : 'js';
}
