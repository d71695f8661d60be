import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it, mock } from 'node:test';
import { watchStartup } from './startup-watch.js';

interface Report {
  fields: Record<string, unknown>;
  message: string;
}

describe('watchStartup', () => {
  let clock = 0;
  let reports: Report[] = [];
  const log = {
    warn: (fields: Record<string, unknown>, message: string) => reports.push({ fields, message }),
  };

  beforeEach(() => {
    clock = 1_000;
    reports = [];
    mock.timers.enable({ apis: ['setTimeout'] });
  });
  afterEach(() => mock.timers.reset());

  /** Moves the watch's clock and the timers together. */
  const advance = (ms: number) => {
    clock += ms;
    mock.timers.tick(ms);
  };

  it('is silent while a start is quick', () => {
    const watch = watchStartup(log, 'gateway', { intervalMs: 10_000, now: () => clock });
    watch.stage('connecting to NATS');
    advance(9_999);
    watch.done();
    advance(60_000);
    assert.deepEqual(reports, []);
  });

  it('names a step that lasts the interval, then again every interval, with how long it and the start took', () => {
    const watch = watchStartup(log, 'gateway', { intervalMs: 10_000, now: () => clock });
    watch.stage('migrating the database');
    advance(9_000);
    // A step that began just before the interval ran out is not reported as slow.
    watch.stage('connecting to NATS');
    advance(9_999);
    assert.deepEqual(reports, []);
    advance(1);
    advance(10_000);
    assert.deepEqual(reports, [
      {
        fields: { stage: 'connecting to NATS', stage_ms: 10_000, startup_ms: 19_000 },
        message: 'gateway is still starting: connecting to NATS',
      },
      {
        fields: { stage: 'connecting to NATS', stage_ms: 20_000, startup_ms: 29_000 },
        message: 'gateway is still starting: connecting to NATS',
      },
    ]);
  });

  it('stops reporting once the start is done', () => {
    const watch = watchStartup(log, 'scheduler', { intervalMs: 1_000, now: () => clock });
    advance(1_000);
    assert.equal(reports.length, 1);
    assert.equal(reports[0]?.message, 'scheduler is still starting: starting');
    watch.done();
    advance(10_000);
    assert.equal(reports.length, 1);
  });
});
