import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createBusCatalog } from './catalog.js';
import { decodeMessage } from './messages.js';
import { wakeDispatcherForEach } from './ready-step-wake.js';

/** A connection that keeps what is published. */
function recorder(): {
  nc: { publish(subject: string, data: Uint8Array): void };
  sent: { subject: string; message: unknown }[];
} {
  const sent: { subject: string; message: unknown }[] = [];
  return {
    nc: {
      publish: (subject, data) =>
        void sent.push({ subject, message: decodeMessage(subject, data) }),
    },
    sent,
  };
}

describe('the dispatcher wake-ups for a list of steps', () => {
  const catalog = createBusCatalog('wake_test');

  it('publishes one per resource, priority and dispatched, in the order first seen', () => {
    const { nc, sent } = recorder();
    wakeDispatcherForEach(nc, catalog, 'task.created', [
      { resource: 'llm', priority: 2 },
      { resource: 'llm', priority: 2 },
      { resource: 'tool', priority: 2 },
      { resource: 'llm', priority: 0 },
      { resource: 'llm', priority: 0, dispatched: true },
      { resource: 'llm', priority: 0, dispatched: true },
      { resource: 'llm', priority: 2 },
    ]);
    assert.deepEqual(
      sent.map(({ message }) => message),
      [
        { type: 'wake', reason: 'task.created', step: { resource: 'llm', priority: 2 } },
        { type: 'wake', reason: 'task.created', step: { resource: 'tool', priority: 2 } },
        { type: 'wake', reason: 'task.created', step: { resource: 'llm', priority: 0 } },
        {
          type: 'wake',
          reason: 'task.created',
          step: { resource: 'llm', priority: 0, dispatched: true },
        },
      ],
    );
    assert.ok(sent.every(({ subject }) => subject === catalog.subjects.wake('dispatch')));
  });

  it('names only the resource and priority of steps that carry more', () => {
    const { nc, sent } = recorder();
    const added = [{ seq: 2, name: 'summarise', resource: 'llm', priority: 1 as const }];
    wakeDispatcherForEach(nc, catalog, 'step.continued', added);
    assert.deepEqual(sent.at(0)?.message, {
      type: 'wake',
      reason: 'step.continued',
      step: { resource: 'llm', priority: 1 },
    });
  });

  it('publishes nothing for no steps', () => {
    const { nc, sent } = recorder();
    wakeDispatcherForEach(nc, catalog, 'urgent.released', []);
    assert.equal(sent.length, 0);
  });
});
