/**
 * `npm start -- …` and `npm run demo -- …` with an argument they do not take: one line saying
 * which, and how to call them, with exit status 2 (a usage error) — not Node's stack trace of the
 * argument parser.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

const CASES = [
  { entry: 'scripts/start/main.ts', args: ['--bogus'], says: /Unknown option '--bogus'/ },
  { entry: 'scripts/start/main.ts', args: ['llm'], says: /Unexpected argument 'llm'/ },
  { entry: 'scripts/start/main.ts', args: ['--resource'], says: /--resource/ },
  { entry: 'scripts/demo/main.ts', args: ['--help'], says: /Unknown option '--help'/ },
];

for (const { entry, args, says } of CASES) {
  test(`${entry} ${args.join(' ')}: a usage error, exit 2`, () => {
    const result = spawnSync(process.execPath, ['--import', 'tsx', entry, ...args], {
      cwd: REPO_ROOT,
      encoding: 'utf8',
      timeout: 60_000,
    });
    assert.equal(result.status, 2, result.stderr);
    assert.match(result.stderr, says);
    assert.match(result.stderr, /^usage: npm (start|run demo)/m);
    assert.doesNotMatch(result.stderr, /^\s+at /m, 'no stack trace');
  });
}
