import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { METRIC_DEFINITIONS, createMetrics } from './metrics.js';
import type { MetricDefinition } from './metrics.js';

const definitions: Array<[string, MetricDefinition]> = Object.entries(METRIC_DEFINITIONS);

/** Labels whose values are unbounded; one time series per task or tenant would never end. */
const FORBIDDEN_LABELS = ['task_id', 'task', 'tenant', 'tenant_id', 'id', 'step_id', 'trace_id'];

describe('the metric catalogue', () => {
  it('uses unique Prometheus names with the sluice_ prefix', () => {
    const names = definitions.map(([, def]) => def.name);
    assert.equal(new Set(names).size, names.length);
    for (const name of names) assert.match(name, /^sluice_[a-z][a-z0-9_]*$/);
  });

  it('never labels by task or tenant', () => {
    for (const [key, def] of definitions) {
      for (const label of def.labelNames) {
        assert.ok(!FORBIDDEN_LABELS.includes(label), `${key} is labelled by ${label}`);
        assert.match(label, /^[a-z][a-z0-9_]*$/);
      }
    }
  });

  it('gives histograms ascending buckets in seconds', () => {
    for (const [, def] of definitions) {
      if (def.buckets === undefined) continue;
      assert.match(def.name, /_seconds$/);
      const sorted = [...def.buckets].sort((a, b) => a - b);
      assert.deepEqual([...def.buckets], sorted);
      assert.equal(new Set(def.buckets).size, def.buckets.length);
    }
  });
});

describe('createMetrics', () => {
  it('registers every catalogue metric with its Prometheus type and naming', async () => {
    const metrics = createMetrics();
    const exposition = await metrics.registry.metrics();
    for (const [key, def] of definitions) {
      const typeLine = new RegExp(`^# TYPE ${def.name} (counter|gauge|histogram)$`, 'm').exec(
        exposition,
      );
      assert.ok(typeLine, `${def.name} (${key}) is not exposed`);
      const type = typeLine[1];
      if (type === 'counter') assert.match(def.name, /_total$/, `${def.name} is a counter`);
      else assert.doesNotMatch(def.name, /_total$/, `${def.name} is a ${type}`);
      assert.equal(type === 'histogram', def.buckets !== undefined, `${def.name} is a ${type}`);
      assert.ok(key in metrics, `createMetrics() has no ${key}`);
    }
  });

  it('includes the default process metrics', async () => {
    const exposition = await createMetrics().registry.metrics();
    assert.match(exposition, /^# TYPE process_cpu_user_seconds_total counter$/m);
    assert.match(exposition, /^# TYPE nodejs_eventloop_lag_seconds gauge$/m);
  });

  it('gives each call its own registry', async () => {
    const a = createMetrics();
    const b = createMetrics();
    assert.notEqual(a.registry, b.registry);

    a.tasksCreated.inc({ priority: 'P1' }, 3);
    a.queueDepth.set({ priority: 'P0', resource: 'llm' }, 7);
    a.taskWaitTime.observe({ priority: 'P2', type: 'summarize-url' }, 0.3);
    a.cancellations.inc();

    const exposedA = await a.registry.metrics();
    assert.match(exposedA, /^sluice_tasks_created_total\{priority="P1"\} 3$/m);
    assert.match(exposedA, /^sluice_queue_depth_by_priority\{priority="P0",resource="llm"\} 7$/m);
    assert.match(
      exposedA,
      /^sluice_task_wait_time_seconds_bucket\{le="0.5",priority="P2",type="summarize-url"\} 1$/m,
    );
    assert.match(exposedA, /^sluice_cancellations_total 1$/m);

    const exposedB = await b.registry.metrics();
    assert.doesNotMatch(exposedB, /^sluice_tasks_created_total\{/m);
    assert.match(exposedB, /^sluice_cancellations_total 0$/m);
  });
});
