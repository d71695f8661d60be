import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ErrorClass } from './errors.js';
import { decideRepair, repairInputOf, type RepairDecision } from './repair-policy.js';
import { historyProblem, type HistoryEntry } from './task-state.js';

function ask(
  errorClass: ErrorClass,
  repairStep: string | undefined,
  repairsSoFar = 0,
  maxRepairs = 2,
): RepairDecision {
  return decideRepair({
    error: { errorClass, message: 'x', retryable: false },
    repairStep,
    repairsSoFar,
    maxRepairs,
  });
}

describe('decideRepair', () => {
  const table: Array<[string, RepairDecision, RepairDecision]> = [
    [
      'schema failure with a repair step',
      ask('schema_validation', 'fix'),
      { repair: true, step: 'fix' },
    ],
    [
      'schema failure, second repair of two',
      ask('schema_validation', 'fix', 1, 2),
      { repair: true, step: 'fix' },
    ],
    [
      'schema failure, repairs used up',
      ask('schema_validation', 'fix', 2, 2),
      { repair: false, reason: 'repairs_exhausted' },
    ],
    [
      'schema failure without a repair step',
      ask('schema_validation', undefined),
      { repair: false, reason: 'no_repair_step' },
    ],
    [
      'another class never goes to repair',
      ask('external_5xx', 'fix'),
      { repair: false, reason: 'not_schema_validation' },
    ],
    [
      'permission denied never goes to repair',
      ask('permission_denied', 'fix'),
      { repair: false, reason: 'not_schema_validation' },
    ],
  ];
  for (const [name, actual, expected] of table) {
    it(name, () => assert.deepEqual(actual, expected));
  }

  it('builds the repair input from what failed', () => {
    assert.deepEqual(
      repairInputOf({
        repairOf: 'draft',
        input: { q: 1 },
        result: { type: 'complete' },
        error: 'e',
      }),
      { repairOf: 'draft', input: { q: 1 }, result: { type: 'complete' }, error: 'e' },
    );
  });
});

describe('repair in the transition table', () => {
  // A repair is the `continue` of a running task (the failed step's outcome starts the repair
  // step), so no state or event is added: both endings are paths of the table.
  const entry = (type: HistoryEntry['event']['type'], toStatus: HistoryEntry['toStatus']) =>
    ({ event: { type }, toStatus }) as HistoryEntry;
  const table: Array<[string, HistoryEntry[]]> = [
    [
      'repaired: start, continue (repair), complete',
      [
        entry('create', 'queued'),
        entry('start', 'running'),
        entry('continue', 'running'),
        entry('complete', 'succeeded'),
      ],
    ],
    [
      'repair fails too: start, continue (repair), fail_terminal',
      [
        entry('create', 'queued'),
        entry('start', 'running'),
        entry('continue', 'running'),
        entry('fail_terminal', 'failed_terminal'),
      ],
    ],
    [
      'no repair step: start, fail_terminal',
      [
        entry('create', 'queued'),
        entry('start', 'running'),
        entry('fail_terminal', 'failed_terminal'),
      ],
    ],
  ];
  for (const [name, history] of table) {
    it(name, () => assert.equal(historyProblem(history), undefined));
  }
});
