/**
 * The `sluice` process when whoever reads its output stops reading (`sluice … | head -1`): it ends
 * quietly, as other command-line tools do, instead of dying with a stack trace.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';

const BIN = fileURLToPath(new URL('../bin/sluice.mjs', import.meta.url));

/** Runs `sluice argv` with its standard output already closed by the reader. */
async function runWithClosedStdout(argv: string[]): Promise<{ code: number | null; err: string }> {
  const child = spawn(process.execPath, [BIN, ...argv], { stdio: ['ignore', 'pipe', 'pipe'] });
  // The reader goes away before the CLI (which takes a moment to start) writes anything.
  child.stdout.destroy();
  let err = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (err += chunk));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  return { code, err };
}

describe('a closed standard output', () => {
  it('ends sluice quietly with 141 (as shells report SIGPIPE), without a stack trace', async () => {
    const { code, err } = await runWithClosedStdout(['--help']);
    assert.equal(err, '');
    assert.equal(code, 141);
  });
});
