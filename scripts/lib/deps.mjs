/** Dependencies and generated files: the pinned pnpm install and the protobuf descriptor set. */
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { localBin, repoRoot } from './repo.mjs';
import { run } from './process.mjs';
import { PrepareError, step } from './log.mjs';

/** The pnpm version of `packageManager` in package.json, fetched through npx. */
const PNPM = 'pnpm@12.4.2';

/**
 * Installs the workspace with the pinned pnpm and the committed lockfile. When everything is up to
 * date pnpm returns in about a second; its output is shown only for a first install (which takes a
 * while) or when it fails.
 */
export async function installDependencies() {
  const firstInstall = !existsSync(path.join(repoRoot, 'node_modules', '.modules.yaml'));
  step(firstInstall ? `installing dependencies with ${PNPM}…` : `checking dependencies (${PNPM})`);
  const started = Date.now();
  const result = await run('npx', ['-y', PNPM, 'install', '--frozen-lockfile'], {
    cwd: repoRoot,
    quiet: !firstInstall,
  });
  if (result.code !== 0) {
    throw new PrepareError(`${PNPM} install --frozen-lockfile failed:\n${result.output}`);
  }
  step(`dependencies ready (${((Date.now() - started) / 1000).toFixed(1)} s)`);
}

/**
 * Builds `proto/sluice.binpb`, the descriptor set the gateway serves through reflection. Skipped
 * with a notice while the repository has no protos or no buf configuration yet.
 */
export async function buildDescriptors() {
  const hasProtos = containsProto(path.join(repoRoot, 'proto'));
  const hasConfig = ['buf.yaml', 'buf.work.yaml'].some((f) => existsSync(path.join(repoRoot, f)));
  if (!hasProtos || !hasConfig) {
    step(`proto: skipped (no ${hasProtos ? 'buf.yaml' : '.proto files under proto/'} yet)`);
    return;
  }
  const result = await run(localBin('buf'), ['build', '-o', 'proto/sluice.binpb'], {
    cwd: repoRoot,
    quiet: true,
  });
  if (result.code !== 0) throw new PrepareError(`buf build failed:\n${result.output}`);
  step('proto: built proto/sluice.binpb');
}

function containsProto(dir) {
  if (!existsSync(dir)) return false;
  return readdirSync(dir, { withFileTypes: true }).some((entry) =>
    entry.isDirectory() ? containsProto(path.join(dir, entry.name)) : entry.name.endsWith('.proto'),
  );
}
