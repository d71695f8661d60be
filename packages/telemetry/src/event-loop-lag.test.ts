import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, it } from 'node:test';
import { Registry, collectDefaultMetrics } from 'prom-client';
import {
  LAG_SAMPLE_MS,
  PROM_CLIENT_SAMPLE_MS,
  replaceEventLoopLagGauges,
  type LagSampler,
} from './event-loop-lag.js';

const LAG_GAUGES = ['min', 'max', 'mean', 'stddev', 'p50', 'p90', 'p99'].map(
  (name) => `nodejs_eventloop_lag_${name}_seconds`,
);

function lagRegistry(): { registry: Registry; sampler: LagSampler } {
  const registry = new Registry();
  collectDefaultMetrics({
    register: registry,
    eventLoopMonitoringPrecision: PROM_CLIENT_SAMPLE_MS,
  });
  return { registry, sampler: replaceEventLoopLagGauges(registry) };
}

/** Scrapes `registry` and reads each lag gauge's value. */
async function scrape(registry: Registry): Promise<Map<string, number>> {
  const exposition = await registry.metrics();
  const values = new Map<string, number>();
  for (const name of LAG_GAUGES) {
    const match = new RegExp(`^${name} (\\S+)$`, 'm').exec(exposition);
    assert.ok(match, `${name} is not exposed`);
    values.set(name, Number(match[1]));
  }
  return values;
}

/** Waits (the loop free) until the sampler took `count` samples since the last scrape. */
async function samplesTaken(sampler: LagSampler, count: number): Promise<void> {
  while (sampler.samples() < count) await sleep(LAG_SAMPLE_MS / 4);
}

/** Keeps the event loop busy for `ms`. */
function block(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    // busy: no timer can fire
  }
}

describe('the event loop lag gauges', () => {
  it('replace prom-client’s: each exposed once, described as the delay beyond the interval', async () => {
    const { registry } = lagRegistry();
    const exposition = await registry.metrics();
    for (const name of LAG_GAUGES) {
      assert.equal(exposition.match(new RegExp(`^# TYPE ${name} gauge$`, 'gm'))?.length, 1, name);
      assert.match(exposition, new RegExp(`^# HELP ${name} .*beyond its ${LAG_SAMPLE_MS} ms`, 'm'));
    }
    // prom-client's scrape-time gauge stays as it is.
    assert.match(exposition, /^# TYPE nodejs_eventloop_lag_seconds gauge$/m);
  });

  it('read 0 before the first sample', async () => {
    const { registry } = lagRegistry();
    for (const [name, value] of await scrape(registry)) assert.equal(value, 0, name);
  });

  it('read about 0 for a loop that is free, not the sampling interval', async () => {
    const { registry, sampler } = lagRegistry();
    await samplesTaken(sampler, 5);
    const lag = await scrape(registry);
    // The histogram's raw p50 is the interval itself (0.1 s): the gauge reads the delay beyond it.
    assert.ok(
      lag.get('nodejs_eventloop_lag_p50_seconds')! < LAG_SAMPLE_MS / 2_000,
      JSON.stringify([...lag]),
    );
  });

  it('show a blocked loop, and start over at each scrape', async () => {
    const { registry, sampler } = lagRegistry();
    await samplesTaken(sampler, 1);
    // 3 intervals blocked: the sample due first inside the block fires at least 2 intervals late.
    block(3 * LAG_SAMPLE_MS);
    await samplesTaken(sampler, 2);
    const blocked = await scrape(registry);
    const blockedMax = blocked.get('nodejs_eventloop_lag_max_seconds')!;
    assert.ok(blockedMax >= (1.5 * LAG_SAMPLE_MS) / 1_000, String(blockedMax));

    // Free again: the next scrape no longer holds the late sample.
    await samplesTaken(sampler, 3);
    const after = await scrape(registry);
    assert.ok(
      after.get('nodejs_eventloop_lag_max_seconds')! < blockedMax,
      JSON.stringify([...after]),
    );
  });
});
