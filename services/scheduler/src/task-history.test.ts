import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { TaskHistory } from './task-history.js';
import type { EventFacts } from './task-metrics.js';

function event(seq: number, type: string, toStatus: string | null = null): EventFacts {
  return { seq, type, fromStatus: null, toStatus, data: null, createdAt: new Date(seq * 1_000) };
}

describe('TaskHistory', () => {
  it('knows a task from its first event and keeps only what later observations look back at', () => {
    const history = new TaskHistory();
    assert.deepEqual(history.before('t', 1), []);
    history.append('t', event(1, 'create', 'queued'));
    history.append('t', event(2, 'step_progress'));
    history.append('t', event(3, 'start', 'running'));
    assert.deepEqual(
      history.before('t', 4)?.map((e) => e.type),
      ['create', 'start'],
    );
  });

  it('does not answer for a task whose earlier events it missed, or out of sequence', () => {
    const history = new TaskHistory();
    assert.equal(history.before('t', 5), undefined, 'never seen');
    history.append('t', event(1, 'create', 'queued'));
    assert.equal(history.before('t', 3), undefined, 'event 2 missed');
    history.append('t', event(3, 'start', 'running'));
    assert.equal(history.before('t', 4), undefined, 'an out-of-sequence event leaves it unknown');
  });

  it('takes a task read from the database and goes on from there', () => {
    const history = new TaskHistory();
    history.load('t', [event(1, 'create', 'queued'), event(2, 'step_progress')], 2);
    history.append('t', event(3, 'start', 'running'));
    assert.deepEqual(
      history.before('t', 4)?.map((e) => e.seq),
      [1, 3],
    );
  });

  it("keeps an event's facts, not the rest of the row it came in", () => {
    const history = new TaskHistory();
    const row = {
      ...event(1, 'create', 'queued'),
      id: 7,
      taskId: 't',
      tenantId: 'acme',
      step: 'a',
    };
    history.append('t', row);
    history.load('u', [row], 1);
    for (const task of ['t', 'u']) {
      assert.deepEqual(history.before(task, 2), [event(1, 'create', 'queued')]);
    }
  });

  it('forgets the least recently active task beyond its capacity', () => {
    const history = new TaskHistory(2);
    history.append('a', event(1, 'create', 'queued'));
    history.append('b', event(1, 'create', 'queued'));
    history.append('a', event(2, 'start', 'running'));
    history.append('c', event(1, 'create', 'queued'));
    assert.equal(history.size, 2);
    assert.equal(history.before('b', 2), undefined, 'b was the least recently active');
    assert.ok(history.before('a', 3));
    assert.ok(history.before('c', 2));
  });
});
