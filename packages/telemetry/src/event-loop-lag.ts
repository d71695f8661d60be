/**
 * The event loop's lag, sampled ten times a second instead of a hundred.
 *
 * prom-client's default metrics sample the loop with `monitorEventLoopDelay` every 10 ms, a timer
 * that wakes every process of Sluice a hundred times a second or more, work or not: 4–6 ms of CPU
 * a second per process on the two-core machines Sluice is measured on, about a third of what an
 * idle stack (gateway, scheduler, governor, an executor) spends. Its gauges are also not the
 * lag: the histogram records the time between two samples, so a healthy loop reads 10 ms at
 * p50.
 *
 * Here the same gauges (`nodejs_eventloop_lag_{min,max,mean,stddev,p50,p90,p99}_seconds`, which
 * dashboards know) come from a histogram of our own sampled every {@link LAG_SAMPLE_MS}, each
 * reading the delay beyond that interval: a healthy loop reads about 0, a loop blocked for 50 ms
 * at a sample reads about 0.05. A block between two samples is seen only when it overlaps one,
 * so short blocks are undercounted; a loop that is slow for a while shows. Like prom-client's,
 * the histogram starts over at each scrape. prom-client's own `nodejs_eventloop_lag_seconds` (the
 * delay of one `setImmediate` at scrape time) is kept as it is.
 */
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';
import { Gauge, type Registry } from 'prom-client';

/** How often the loop is sampled. */
export const LAG_SAMPLE_MS = 100;

/**
 * What prom-client's own sampler is given once its gauges are replaced: it cannot be turned off,
 * so it wakes once a minute for a histogram nothing reads.
 */
export const PROM_CLIENT_SAMPLE_MS = 60_000;

const NS_PER_SECOND = 1e9;
const SAMPLE_NS = LAG_SAMPLE_MS * 1e6;

/** The gauges replaced, by name, with what each reads from the histogram (in nanoseconds). */
const LAG_GAUGES: readonly {
  readonly name: string;
  readonly help: string;
  readonly read: (histogram: IntervalHistogram) => number;
}[] = [
  { name: 'min', help: 'The smallest', read: (h) => h.min - SAMPLE_NS },
  { name: 'max', help: 'The largest', read: (h) => h.max - SAMPLE_NS },
  { name: 'mean', help: 'The mean', read: (h) => h.mean - SAMPLE_NS },
  // The intervals spread as the delays do: nothing to take off.
  { name: 'stddev', help: 'The standard deviation of the', read: (h) => h.stddev },
  { name: 'p50', help: 'The median', read: (h) => h.percentile(50) - SAMPLE_NS },
  { name: 'p90', help: 'The 90th percentile of the', read: (h) => h.percentile(90) - SAMPLE_NS },
  { name: 'p99', help: 'The 99th percentile of the', read: (h) => h.percentile(99) - SAMPLE_NS },
];

/** The sampler behind a registry's lag gauges. */
export interface LagSampler {
  /** Samples taken since the last scrape. */
  samples(): number;
}

/**
 * Puts the lag gauges on `registry` in place of prom-client's (call after `collectDefaultMetrics`
 * with `eventLoopMonitoringPrecision: PROM_CLIENT_SAMPLE_MS`), fed by a histogram of this
 * registry's own.
 */
export function replaceEventLoopLagGauges(registry: Registry): LagSampler {
  const histogram = monitorEventLoopDelay({ resolution: LAG_SAMPLE_MS });
  histogram.enable();
  const gauges: { readonly gauge: Gauge; readonly read: (h: IntervalHistogram) => number }[] = [];
  // One gauge's collect sets them all and starts the histogram over, as prom-client's does: the
  // first one's, which the registry reads first, so every gauge is set before it is read.
  const collect = () => {
    // No sample yet (a scrape within the first interval): nothing is late.
    const sampled = histogram.count > 0;
    for (const { gauge, read } of gauges) {
      gauge.set(sampled ? Math.max(0, read(histogram)) / NS_PER_SECOND : 0);
    }
    histogram.reset();
  };
  for (const [index, { name, help, read }] of LAG_GAUGES.entries()) {
    const metricName = `nodejs_eventloop_lag_${name}_seconds`;
    registry.removeSingleMetric(metricName);
    const gauge = new Gauge({
      name: metricName,
      help: helpOf(help),
      registers: [registry],
      ...(index === 0 ? { collect } : {}),
    });
    gauges.push({ gauge, read });
  }
  return { samples: () => histogram.count };
}

function helpOf(what: string): string {
  return `${what} delay of the event loop beyond its ${LAG_SAMPLE_MS} ms sampling interval, in seconds, since the last scrape.`;
}
