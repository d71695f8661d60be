/**
 * What a Sluice service holds after a full garbage collection (live-heap-probe.mjs, preloaded into
 * each service of a bench stack): the footprint scenario asks for it with the backlog queued, so
 * that its report can tell memory a service keeps from heap V8 has not collected yet.
 */
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { ServiceProcess } from '../../../../test/support/service-process.js';
import type { LiveHeap } from '../system.js';

const PROBE = fileURLToPath(new URL('./live-heap-probe.mjs', import.meta.url));
/** How live-heap-probe.mjs starts its line. */
const MARKER = 'sluice-bench live heap ';
/** A full collection of a service's heap takes milliseconds; a busy machine, more. */
const PROBE_TIMEOUT_MS = 30_000;

/** The `NODE_OPTIONS` that preload the probe into a service. */
export function liveHeapProbeOptions(): string {
  return `--import=${pathToFileURL(PROBE).href}`;
}

/**
 * Signals the service to collect its garbage and waits for its answer.
 *
 * @throws Error when the service does not answer in time (it was started without the probe) or
 *   exits first.
 */
export async function readLiveHeap(service: ServiceProcess): Promise<LiveHeap> {
  const from = service.stderr.length;
  service.kill('SIGUSR2');
  const line = await service.waitForStderrLine((l) => l.startsWith(MARKER), {
    from,
    timeoutMs: PROBE_TIMEOUT_MS,
  });
  return parseLiveHeap(line.slice(MARKER.length));
}

/** The probe's JSON, checked field by field: a figure in a report must not be `undefined`. */
export function parseLiveHeap(json: string): LiveHeap {
  const value = JSON.parse(json) as Record<string, unknown>;
  const bytes = (field: string): number => {
    const n = value[field];
    if (typeof n !== 'number' || !Number.isFinite(n) || n < 0) {
      throw new Error(`live heap probe: ${field} is ${String(n)} in ${json}`);
    }
    return n;
  };
  return { heapUsedBytes: bytes('heapUsedBytes'), rssBytes: bytes('rssBytes') };
}
