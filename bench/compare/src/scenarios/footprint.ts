/**
 * Footprint (issue 7): "peak resident memory of each process and CPU seconds per 1,000 tasks;
 * memory with a 100,000-task backlog". Run as drain is — N no-op jobs enqueued with no worker
 * running, then the workers started until the ledger is complete (every job exactly once, or the
 * run fails) — while a sampler reads /proc every 250 ms for the system's processes
 * (`QueueSystem.processes`, asked again every second as connections and workers come) and for the
 * bench process itself. Reported per system:
 * - peak resident memory of each role (a service, a server, the Postgres backends serving the
 *   run's database summed, the bench process);
 * - CPU seconds per 1,000 jobs of the enqueue phase and of the processing phase, summed over the
 *   system's processes and the bench process where the system's workers run in it (BullMQ, pg-boss,
 *   Graphile Worker, the raw floors); where they run elsewhere (Sluice's executor) the bench
 *   process is only the client, reported apart;
 * - CPU while idle (% of a core): the set-up system over 2 s with nothing to do — polling and
 *   heartbeats, which the per-1,000 figures also pay for as long as a phase lasts. With
 *   `--idle-seconds N`, over N seconds after N seconds of settling: a system whose loops slow
 *   down while idle (Sluice's scheduler) reaches its idle pace only after several seconds;
 * - resident memory with the backlog of N jobs queued (after the enqueue, before any worker);
 *   then, where the system has Node processes of its own (`QueueSystem.liveHeaps`: Sluice's
 *   services), what each holds after a full garbage collection — its live heap, and its resident
 *   memory then — which tells memory kept per task from heap V8 had not collected yet; the live
 *   heaps also before the enqueue and after the processing, which tell whether a process keeps
 *   anything per job it handled.
 * Shared servers (the machine's nats-server and Redis) show their growth over the run (Δ). The
 * sampler's own CPU time is taken off the bench process; the `processes()` query once a second
 * (a Postgres round trip for the Postgres-based systems) is not.
 * The backlog is the run's count: 5,000 in the default set (which must finish within 20 minutes),
 * 100,000 in the full set (`--full`, the figure; a Sluice enqueue of 100,000 takes about
 * 10 minutes at ~180 jobs/s), or `--count`.
 */
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { readProcess, type CpuMark, type RoleFootprint } from '../footprint-sampler.js';
import { describePostgresWork, postgresWorkFigures, postgresWorkPerJob } from '../postgres-work.js';
import { Ledger } from '../ledger.js';
import type { Scenario, ScenarioContext, ScenarioResult } from '../scenario.js';
import type { Job, QueueSystem, SystemProcess } from '../system.js';
import { BENCH_ROLE, SystemProcesses } from '../system-processes.js';
import { enqueueInChunks, processBacklog, processingTimeoutMs } from './backlog.js';
import { runFramed } from './framed-run.js';

/** How long the set-up system is watched doing nothing, for its idle CPU. */
const IDLE_WINDOW_MS = 2_000;
/** Pause after the enqueue before the backlog's memory is read: let in-flight work settle. */
const BACKLOG_SETTLE_MS = 1_000;
/**
 * The same two in a smoke run, whose figures only have to exist: the full windows cost the CI
 * suite three seconds per system and variant (about 40 s in all).
 */
const SMOKE_IDLE_WINDOW_MS = 300;
const SMOKE_BACKLOG_SETTLE_MS = 100;
const MB = 1024 * 1024;

export const footprint: Scenario = {
  name: 'footprint',
  description:
    'peak memory per process, CPU seconds per 1,000 jobs enqueued and processed, memory with N jobs backlogged',
  defaultCount: 5_000,
  // The figure: memory with a 100,000-job backlog (the full set; Sluice takes ~10 min).
  fullCount: 100_000,
  smokeCount: 100,

  async run(system: QueueSystem, context: ScenarioContext): Promise<ScenarioResult> {
    const { count, concurrency, progress } = context;
    const idleWindowMs =
      context.idleSeconds !== undefined
        ? context.idleSeconds * 1_000
        : context.smoke
          ? SMOKE_IDLE_WINDOW_MS
          : IDLE_WINDOW_MS;
    // A window asked for is measured after as long a settle; the default one at once.
    const idleSettleMs = context.idleSeconds === undefined ? 0 : idleWindowMs;
    const backlogSettleMs = context.smoke ? SMOKE_BACKLOG_SETTLE_MS : BACKLOG_SETTLE_MS;
    const run = randomBytes(4).toString('hex');
    const jobs: Job[] = Array.from({ length: count }, (_, i) => ({ id: `${run}-${i}` }));
    const ledger = new Ledger(jobs.map((j) => j.id));
    const processes = new SystemProcesses(system);
    const { sampler, seen } = processes;
    // The harness alone (every adapter's libraries loaded), before the system adds to it.
    const benchIdle = readProcess(process.pid);
    return runFramed({
      scenario: 'footprint',
      system,
      context,
      ledger,
      body: async (frame) => {
        const { figures, notes, label } = frame;
        try {
          await processes.start();

          // The system at rest: what its processes spend with nothing to do (polling, heartbeats),
          // which every phase below also pays for as long as it lasts.
          if (idleSettleMs > 0) {
            progress.update(`${label}: letting it settle for ${idleSettleMs / 1_000} s`);
            await new Promise((resolve) => setTimeout(resolve, idleSettleMs));
          }
          progress.update(`${label}: measuring idle`);
          const idleMark = sampler.mark();
          const idleStart = performance.now();
          await new Promise((resolve) => setTimeout(resolve, idleWindowMs));
          const idleCpu = sampler.cpuSince(idleMark);
          const idleSeconds = (performance.now() - idleStart) / 1_000;
          if (idleSettleMs > 0) {
            notes.push(
              `CPU idle over ${idleSeconds.toFixed(0)} s, after ${idleSettleMs / 1_000} s of settling (--idle-seconds)`,
            );
          }

          // The live heaps at rest, to compare with those after the run's jobs (below).
          const liveHeapsIdle = await system.liveHeaps?.();
          const work = system.postgresWork?.bind(system);
          const workBefore = await work?.();
          const enqueueMark = sampler.mark();
          const enqueueSeconds = await enqueueInChunks(
            jobs,
            (slice) => system.enqueue(slice),
            (enqueued) => progress.update(`${label}: enqueued ${enqueued}/${count}`),
          );
          const enqueueCpu = sampler.cpuSince(enqueueMark);
          if (ledger.handled > 0) {
            notes.push(`${ledger.handled} jobs were handled before the workers were started`);
          }

          progress.update(`${label}: ${count} jobs backlogged, reading memory`);
          await new Promise((resolve) => setTimeout(resolve, backlogSettleMs));
          await processes.refresh();
          sampler.sample();
          const backlog = sampler.footprints();
          // What the system's own Node processes hold with the backlog, after a full collection:
          // asked after the resident memory above was read (a collection gives memory back), and
          // before the processing mark, so that its CPU counts in neither phase.
          const liveHeaps = await system.liveHeaps?.();

          // Marked before the workers start: their start-up in the bench process is processing
          // cost; a worker process started by `startWorkers` counts from when it is first seen.
          // The server's work of the enqueue runs to here: what the system wrote after answering
          // (Sluice's relay marking the creates' events) is the enqueue's.
          const workEnqueued = await work?.();
          const processingMark: CpuMark = sampler.mark();
          const processing = await processBacklog({
            frame,
            completion: ledger,
            startWorkers: () => system.startWorkers({ handler: ledger.handler, concurrency }),
            afterStart: () => processes.refresh(),
            timeoutMs: processingTimeoutMs(count),
            progressLine: () => `${label}: handled ${ledger.handled}/${count}`,
            onProgress: (line) => progress.update(line),
          });
          const processingCpu = sampler.cpuSince(processingMark);
          const workProcessed = await work?.();
          // Again once every job went through: a process that keeps something per job holds more.
          const liveHeapsProcessed = await system.liveHeaps?.();
          const processingSeconds = processing.seconds;

          const workersInBench = processes.workersInBench;
          const shared = (role: string) => seen.get(role)?.shared === true;
          const perThousand = (cpu: ReadonlyMap<string, number>, role?: string) =>
            (processes.cpuOf(cpu, role) * 1_000) / count;
          const idlePercent = (role?: string) =>
            (processes.cpuOf(idleCpu, role) / idleSeconds) * 100;
          /** Memory of a role: its own, or for a shared server its growth since first sampled. */
          const memoryOf = (f: RoleFootprint, bytes: number) =>
            Math.max(0, shared(f.role) ? bytes - f.firstBytes : bytes) / MB;

          figures.push(
            {
              key: 'enqueue_rate',
              label: 'enqueue',
              value: count / enqueueSeconds,
              unit: 'jobs/s',
            },
            {
              key: 'processing_rate',
              label: 'processing',
              value: count / processingSeconds,
              unit: 'jobs/s',
            },
            {
              key: 'cpu_enqueue_per_1k',
              label: 'CPU per 1,000 enqueued',
              value: perThousand(enqueueCpu),
              unit: 's',
            },
            {
              key: 'cpu_processing_per_1k',
              label: 'CPU per 1,000 processed',
              value: perThousand(processingCpu),
              unit: 's',
            },
            {
              key: 'idle_cpu_percent',
              label: 'CPU idle',
              value: idlePercent(),
              unit: '% of a core',
            },
            {
              key: 'backlog_mb',
              label: `memory with ${count} backlogged`,
              value: backlog
                .filter((f) => f.role !== BENCH_ROLE)
                .reduce((sum, f) => sum + memoryOf(f, f.currentBytes), 0),
              unit: 'MB',
            },
            {
              key: 'bench_idle_mb',
              label: 'bench process before setup',
              value: (benchIdle?.rssBytes ?? 0) / MB,
              unit: 'MB',
            },
          );
          const final = sampler.footprints();
          for (const f of final) {
            const name = processes.roleName(f.role);
            const suffix = shared(f.role) ? ' Δ' : '';
            const atBacklog = backlog.find((b) => b.role === f.role);
            figures.push(
              {
                key: `peak_mb:${name}`,
                label: `peak ${name}${suffix}`,
                value: memoryOf(f, f.peakBytes),
                unit: 'MB',
              },
              {
                key: `backlog_mb:${name}`,
                label: `backlogged ${name}${suffix}`,
                value: atBacklog === undefined ? 0 : memoryOf(atBacklog, atBacklog.currentBytes),
                unit: 'MB',
              },
              {
                key: `cpu_enqueue_per_1k:${name}`,
                label: `CPU per 1,000 enqueued, ${name}`,
                value: perThousand(enqueueCpu, f.role),
                unit: 's',
              },
              {
                key: `cpu_processing_per_1k:${name}`,
                label: `CPU per 1,000 processed, ${name}`,
                value: perThousand(processingCpu, f.role),
                unit: 's',
              },
              {
                key: `idle_cpu_percent:${name}`,
                label: `CPU idle, ${name}`,
                value: idlePercent(f.role),
                unit: '% of a core',
              },
            );
            const moments = [
              ['idle', liveHeapsIdle],
              ['backlogged', liveHeaps],
              ['processed', liveHeapsProcessed],
            ] as const;
            for (const [moment, heaps] of moments) {
              const live = heaps?.get(f.role);
              if (live === undefined) continue;
              figures.push({
                key: `live_heap_mb:${moment}:${name}`,
                label: `live heap ${moment}, ${name}`,
                value: live.heapUsedBytes / MB,
                unit: 'MB',
              });
              if (moment === 'backlogged') {
                figures.push({
                  key: `collected_mb:${name}`,
                  label: `backlogged after a full collection, ${name}`,
                  value: live.rssBytes / MB,
                  unit: 'MB',
                });
              }
            }
          }
          if (
            workBefore !== undefined &&
            workEnqueued !== undefined &&
            workProcessed !== undefined
          ) {
            const enqueued = postgresWorkPerJob(workBefore, workEnqueued, count);
            const processed = postgresWorkPerJob(workEnqueued, workProcessed, count);
            figures.push(
              ...postgresWorkFigures(enqueued, { key: 'enqueue', label: 'enqueued' }),
              ...postgresWorkFigures(processed, { key: 'processing', label: 'processed' }),
            );
            notes.push(
              `Postgres per job (the server's counters): enqueued ${describePostgresWork(enqueued)}; processed ${describePostgresWork(processed)}`,
            );
          }
          notes.push(...footprintNotes(system, final, seen, workersInBench));
          if (processes.refreshError !== undefined) {
            notes.push(`processes() failed: ${processes.refreshError}`);
          }
        } finally {
          processes.stop();
        }
      },
    });
  },
};

/** What a reader needs to know to read this system's footprint figures right (the table's
 * footnote explains what is common to all). */
function footprintNotes(
  system: QueueSystem,
  footprints: readonly RoleFootprint[],
  seen: ReadonlyMap<string, SystemProcess>,
  workersInBench: boolean,
): string[] {
  const notes: string[] = [];
  if (!system.processes) notes.push('footprint: only the bench process measured');
  const backends = footprints.find((f) => f.role === 'postgres backends')?.processes;
  if (backends !== undefined) {
    notes.push(`footprint: ${backends} postgres backends served the run's database`);
  }
  if (!workersInBench) {
    notes.push(
      'footprint: the workers run in their own processes, so the bench process is only the client (reported apart, not in the totals); the executor counts from when it was first seen after startWorkers, its start-up excluded',
    );
  }
  if ([...seen.values()].some((p) => p.withDescendants === true)) {
    notes.push(
      'footprint: each service is counted with its descendants (none since services run from bundles; the esbuild of tsx where an executor must load task modules through it)',
    );
  }
  return notes;
}
