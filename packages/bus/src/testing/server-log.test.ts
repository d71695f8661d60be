import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { summarizeServerLog } from './server-log.js';

const numbered = (from: number, to: number) =>
  Array.from({ length: to - from + 1 }, (_, i) => `line ${String(from + i)}`);

describe('summarizeServerLog', () => {
  it('keeps the end of a log without a panic', () => {
    const log = [...numbered(1, 40), ''].join('\n');
    assert.equal(summarizeServerLog(log), numbered(26, 40).join('\n'));
  });

  it('puts the panic message and its first frames before the end of the log', () => {
    const log = [
      ...numbered(1, 5),
      'panic: runtime error: index out of range [-1]',
      '',
      'goroutine 82 [running]:',
      ...numbered(9, 60),
    ].join('\n');
    const summary = summarizeServerLog(log).split('\n');
    assert.deepEqual(summary.slice(0, 3), [
      'panic: runtime error: index out of range [-1]',
      '',
      'goroutine 82 [running]:',
    ]);
    assert.equal(summary.length, 12 + 1 + 15);
    assert.equal(summary[12], '… (28 lines)');
    assert.deepEqual(summary.slice(-15), numbered(46, 60));
  });

  it('does not repeat a panic that is already in the end of the log', () => {
    const log = [...numbered(1, 30), 'fatal error: concurrent map writes', ...numbered(32, 35)];
    assert.deepEqual(summarizeServerLog(log.join('\n')).split('\n'), log.slice(-15));
  });
});
