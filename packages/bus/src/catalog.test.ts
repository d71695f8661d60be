import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isSluiceError } from '@sluice/core';
import type { Priority } from '@sluice/core';
import { createBusCatalog, taskIdTokenProblem } from './catalog.js';

const TASK = '0b8f5a52-3c1e-4d7e-9a4b-1f2e3d4c5b6a';

function rejects(fn: () => unknown, field: string): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(isSluiceError(err), `expected a SluiceError, got ${String(err)}`);
    assert.equal(err.code, 'invalid_argument');
    assert.equal(err.field, field);
    return true;
  });
}

describe('createBusCatalog', () => {
  const c = createBusCatalog();

  it('derives stream, bucket and core subject names from the default prefix', () => {
    assert.equal(c.prefix, 'sluice');
    assert.deepEqual(c.streams, {
      steps: 'SLUICE_STEPS',
      events: 'SLUICE_EVENTS',
      advisories: 'SLUICE_ADVISORIES',
    });
    assert.deepEqual(c.buckets, { leases: 'sluice_leases', governor: 'sluice_governor' });
    assert.equal(c.subjects.stepsAll, 'sluice.step.>');
    assert.equal(c.subjects.eventsAll, 'sluice.events.>');
    assert.equal(c.subjects.stepResult, 'sluice.result');
    assert.equal(c.subjects.cancelAll, 'sluice.control.cancel.*');
    assert.equal(c.subjects.governorDecisions, 'sluice.governor.decisions');
    assert.equal(c.subjects.executorReports, 'sluice.governor.reports');
    assert.equal(c.subjects.guardCaps, 'sluice.scheduler.guard');
    assert.equal(c.subjects.wake('scheduler'), 'sluice.wake.scheduler');
    assert.equal(c.subjects.wake('dispatch'), 'sluice.wake.dispatch');
    assert.equal(c.subjects.wake('relay'), 'sluice.wake.relay');
  });

  it('names step subjects and consumers per resource and priority', () => {
    assert.equal(c.subjects.step('llm', 0), 'sluice.step.llm.p0');
    assert.equal(c.subjects.step('tool:http', 3), 'sluice.step.tool:http.p3');
    assert.equal(c.consumers.step('llm', 0), 'sluice_step_llm_p0');
    assert.equal(c.consumers.step('tool:http', 2), 'sluice_step_tool__http_p2');
    assert.equal(c.consumers.step('mcp:search-v2', 1), 'sluice_step_mcp__search-v2_p1');
    assert.equal(c.consumers.deadLetters, 'sluice_dead_letters');
  });

  it('gives four distinct, non-overlapping step subjects per resource', () => {
    const priorities: Priority[] = [0, 1, 2, 3];
    const subjects = priorities.map((p) => c.subjects.step('browser', p));
    assert.equal(new Set(subjects).size, 4);
    for (const s of subjects) assert.ok(!s.includes('*') && !s.includes('>'), s);
    const consumers = priorities.map((p) => c.consumers.step('browser', p));
    assert.equal(new Set(consumers).size, 4);
  });

  it('names event and cancel subjects from validated tokens', () => {
    assert.equal(c.subjects.events('acme', TASK), `sluice.events.acme.${TASK}`);
    assert.equal(c.subjects.tenantEvents('acme'), 'sluice.events.acme.*');
    assert.equal(c.subjects.cancel(TASK), `sluice.control.cancel.${TASK}`);
  });

  it('names the dead-letter advisories of its own steps stream only', () => {
    assert.equal(
      c.subjects.stepMaxDeliveriesAdvisory,
      '$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.SLUICE_STEPS.*',
    );
    assert.equal(
      c.subjects.stepTerminatedAdvisory,
      '$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.SLUICE_STEPS.*',
    );
  });

  it('follows a custom prefix everywhere', () => {
    const t = createBusCatalog('t_bus_42');
    assert.equal(t.streams.steps, 'T_BUS_42_STEPS');
    assert.equal(t.subjects.step('llm', 1), 't_bus_42.step.llm.p1');
    assert.equal(t.consumers.step('llm', 1), 't_bus_42_step_llm_p1');
    assert.equal(t.buckets.leases, 't_bus_42_leases');
    assert.equal(
      t.subjects.stepTerminatedAdvisory,
      '$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.T_BUS_42_STEPS.*',
    );
  });

  it('refuses bad prefixes', () => {
    for (const bad of ['', 'Sluice', '1abc', 'a.b', 'a-b', 'a*', 'x'.repeat(33)]) {
      rejects(() => createBusCatalog(bad), 'prefix');
    }
  });

  it('refuses resources that could widen, split or collide in a name', () => {
    for (const bad of ['', 'LLM', 'a.b', '*', '>', 'tool:', 'tool:http:x', 'a b', 'tool__http']) {
      rejects(() => c.subjects.step(bad, 0), 'resource');
      rejects(() => c.consumers.step(bad, 0), 'resource');
    }
  });

  it('refuses priorities outside 0..3', () => {
    for (const bad of [-1, 4, 1.5, Number.NaN]) {
      rejects(() => c.subjects.step('llm', bad as Priority), 'priority');
      rejects(() => c.consumers.step('llm', bad as Priority), 'priority');
    }
  });

  it('refuses bad tenant ids and task ids', () => {
    for (const bad of ['', 'Acme', 'a.b', '*', '>', 'a b']) {
      rejects(() => c.subjects.events(bad, TASK), 'tenant_id');
      rejects(() => c.subjects.tenantEvents(bad), 'tenant_id');
    }
    for (const bad of ['', 'a.b', '*', '>', 'a b', 'a:b', 'x'.repeat(65)]) {
      rejects(() => c.subjects.events('acme', bad), 'task_id');
      rejects(() => c.subjects.cancel(bad), 'task_id');
    }
  });

  it('refuses unknown wake targets', () => {
    rejects(() => c.subjects.wake('executor' as 'relay'), 'target');
  });

  it('is immutable', () => {
    assert.ok(Object.isFrozen(c) && Object.isFrozen(c.subjects) && Object.isFrozen(c.streams));
    assert.throws(() => {
      (c.streams as { steps: string }).steps = 'X';
    }, TypeError);
  });
});

describe('taskIdTokenProblem', () => {
  it('accepts UUIDs and short tokens, refuses anything else', () => {
    assert.equal(taskIdTokenProblem(TASK), undefined);
    assert.equal(taskIdTokenProblem('T_1-a'), undefined);
    for (const bad of [undefined, 42, '', 'a.b', 'a:b', 'a>', 'x'.repeat(65)]) {
      assert.equal(typeof taskIdTokenProblem(bad), 'string', String(bad));
    }
  });
});
