import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { promisify } from 'node:util';
import { TurnBatchedDestination, type LineWriter } from './log-destination.js';

/** A writer that keeps each text it is handed, and counts the synchronous flushes. */
function recorder(): LineWriter & { writes: string[]; flushes: number } {
  return {
    writes: [],
    flushes: 0,
    write(text: string) {
      this.writes.push(text);
    },
    flushSync() {
      this.flushes += 1;
    },
  };
}

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('TurnBatchedDestination', () => {
  it("hands the lines of one turn to the writer as one text, in order, at the turn's end", async () => {
    const writer = recorder();
    const destination = new TurnBatchedDestination(writer);
    destination.write('a\n');
    destination.write('b\n');
    await Promise.resolve();
    destination.write('c\n');
    assert.deepEqual(writer.writes, [], 'nothing is written before the turn ends');
    await nextTurn();
    assert.deepEqual(writer.writes, ['a\nb\nc\n']);

    destination.write('d\n');
    await nextTurn();
    assert.deepEqual(writer.writes, ['a\nb\nc\n', 'd\n'], "a later turn's line is its own write");
  });

  it('writes what is pending at once on flushSync, and nothing twice', async () => {
    const writer = recorder();
    const destination = new TurnBatchedDestination(writer);
    destination.write('a\n');
    destination.flushSync();
    assert.deepEqual(writer.writes, ['a\n']);
    assert.equal(writer.flushes, 1);
    await nextTurn();
    assert.deepEqual(writer.writes, ['a\n'], 'the scheduled hand-over finds nothing left');
  });
});

describe("a service's default logger", () => {
  it('writes the lines logged just before process.exit', async () => {
    // process.exit ends the process before the turn's hand-over runs: only the exit flush
    // writes these lines.
    const logger = fileURLToPath(new URL('./logger.ts', import.meta.url));
    const script = [
      `const { createLogger } = await import(${JSON.stringify(logger)});`,
      `const log = createLogger({ service: 'exit-test' });`,
      `for (let i = 0; i < 3; i++) log.info({ i }, 'before exit');`,
      `process.exit(0);`,
    ].join('\n');
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['--import', 'tsx', '--input-type=module', '-e', script],
      { cwd: fileURLToPath(new URL('.', import.meta.url)) },
    );
    const lines = stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { i: number; msg: string; service: string });
    assert.deepEqual(
      lines.map((line) => [line.service, line.msg, line.i]),
      [0, 1, 2].map((i) => ['exit-test', 'before exit', i]),
    );
  });
});
