/**
 * `npm run bench -- …` refuses what it would otherwise ignore: a second positional argument, a
 * `--systems` list that names nothing, and per-system values for systems it does not know (a
 * typo in `--rate-for` paced the latency scenarios by the default table, without a word).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { runBench, type BenchOptions } from './bench.js';

const MAIN = fileURLToPath(new URL('./main.ts', import.meta.url));

/** Runs the command line with `args`; its exit code and stderr. */
function bench(args: readonly string[]): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', MAIN, ...args],
      { timeout: 120_000 },
      (error, _stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : -1;
        resolve({ code, stderr });
      },
    );
  });
}

test('scenarios given as two arguments are refused, not all but the first ignored', async () => {
  const out = await mkdtemp(path.join(tmpdir(), 'sluice-bench-cli-'));
  try {
    // An unknown system as well: the old command went on to it and ran nothing of the second.
    const { code, stderr } = await bench([
      'drain',
      'end-to-end',
      '--systems',
      'none',
      '--out',
      out,
    ]);
    assert.equal(code, 2, stderr);
    assert.match(stderr, /one argument.*drain,end-to-end/);
  } finally {
    await rm(out, { recursive: true, force: true });
  }
});

test('a --systems list that names no system is refused, and no report is written', async () => {
  const out = await mkdtemp(path.join(tmpdir(), 'sluice-bench-cli-'));
  try {
    const { code, stderr } = await bench(['drain', '--systems', ',', '--out', out]);
    assert.equal(code, 2, stderr);
    assert.match(stderr, /--systems names no system/);
    assert.deepEqual(await readdir(out), [], 'the results it would replace are left alone');
  } finally {
    await rm(out, { recursive: true, force: true });
  }
});

const OPTIONS: BenchOptions = {
  scenarios: ['drain'],
  systems: ['raw-postgres'],
  count: 10,
  smoke: true,
  concurrency: 2,
  echo: false,
  progress: false,
  command: 'cli test',
};

test('per-system values for an unknown system are refused before anything runs', async () => {
  await assert.rejects(
    runBench({ ...OPTIONS, rateFor: { 'pg-bos': 500 } }),
    /--rate-for names an unknown system pg-bos/,
  );
  await assert.rejects(
    runBench({ ...OPTIONS, countFor: { slice: 100 } }),
    /--count-for names an unknown system slice/,
  );
});
