/**
 * The footprint table of results.md (scenarios/footprint.ts): per system the CPU seconds per
 * 1,000 jobs enqueued and processed (the client's apart where the system's workers run in their
 * own processes), the memory with the backlog, and the peak memory of each of its processes.
 */
import { figureValue, formatNumber } from './report-format.js';
import { ok, type ScenarioResult } from './scenario.js';

/** The system's CPU per 1,000 jobs of a phase, with the client's where it is reported apart. */
function cpuCell(r: ScenarioResult, key: string, digits = 2): string {
  const total = formatNumber(figureValue(r, key), digits);
  const client = figureValue(r, `${key}:client`);
  return client === undefined ? total : `${total} (+ client ${formatNumber(client, digits)})`;
}

/**
 * Postgres's work per job enqueued and processed (postgres-work.ts), for the systems that keep
 * their jobs there; a dash for the others.
 */
function postgresWorkCell(r: ScenarioResult): string {
  const value = (kind: string, phase: string) => figureValue(r, `${kind}:${phase}`);
  if (value('pg_transactions_per_job', 'enqueue') === undefined) return '–';
  return (
    `${formatNumber(value('pg_transactions_per_job', 'enqueue'), 2)} / ${formatNumber(value('pg_transactions_per_job', 'processing'), 2)}; ` +
    `${formatNumber(value('pg_wal_kb_per_job', 'enqueue'), 1)} / ${formatNumber(value('pg_wal_kb_per_job', 'processing'), 1)} KB`
  );
}

function variant(r: ScenarioResult): string {
  return r.system.batched ? 'batched' : 'one-at-a-time';
}

/** The roles of a result (by their peak figures), in the order they were found. */
function roles(r: ScenarioResult): Array<{ name: string; label: string }> {
  return r.figures
    .filter((f) => f.key.startsWith('peak_mb:'))
    .map((f) => ({ name: f.key.slice('peak_mb:'.length), label: f.label.replace(/^peak /, '') }));
}

/**
 * A process's live heap and resident memory after a full collection with the backlog queued, for
 * the processes the system could ask (QueueSystem.liveHeaps); a dash for the others.
 */
function collectedCells(r: ScenarioResult, name: string): string {
  const heap = (moment: string) => figureValue(r, `live_heap_mb:${moment}:${name}`);
  const moments = ['idle', 'backlogged', 'processed'].map(heap);
  if (moments.every((mb) => mb === undefined)) return '– | –';
  const resident = figureValue(r, `collected_mb:${name}`);
  // The executor starts with the processing: it has a heap after it only.
  const cell = (mb: number | undefined) => (mb === undefined ? '–' : formatNumber(mb, 1));
  return `${moments.map(cell).join(' / ')} | ${cell(resident)}`;
}

function processRows(r: ScenarioResult): string[] {
  const idle = figureValue(r, 'bench_idle_mb');
  return roles(r).map(({ name, label }) => {
    const isBench = name === 'client' || name.startsWith('bench process');
    const peak = `${formatNumber(figureValue(r, `peak_mb:${name}`), 0)}${isBench ? ` (${formatNumber(idle, 0)} before setup)` : ''}`;
    return (
      `| ${r.system.name} | ${variant(r)} | ${label} | ${peak} | ${formatNumber(figureValue(r, `backlog_mb:${name}`), 0)} | ` +
      `${formatNumber(figureValue(r, `cpu_enqueue_per_1k:${name}`), 2)} | ${formatNumber(figureValue(r, `cpu_processing_per_1k:${name}`), 2)} | ` +
      `${formatNumber(figureValue(r, `idle_cpu_percent:${name}`), 1)} | ${collectedCells(r, name)} |`
    );
  });
}

export function footprintTable(results: readonly ScenarioResult[]): string[] {
  return [
    '| System | Variant | Durability | Backlog (jobs) | Enqueue (jobs/s) | Processing (jobs/s) | CPU s per 1,000 enqueued | CPU s per 1,000 processed | CPU idle (% of a core) | Memory with the backlog (MB) | Postgres per job enqueued / processed: write transactions; WAL | Exactly once |',
    '| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |',
    ...results.map((r) => {
      const good = ok(r);
      const cell = (text: string) => (good ? text : 'failed');
      return (
        `| ${r.system.name} | ${variant(r)} | ${r.system.durability} | ${r.count} | ` +
        `${cell(formatNumber(figureValue(r, 'enqueue_rate'), 0))} | ${cell(formatNumber(figureValue(r, 'processing_rate'), 0))} | ` +
        `${cell(cpuCell(r, 'cpu_enqueue_per_1k'))} | ${cell(cpuCell(r, 'cpu_processing_per_1k'))} | ` +
        `${cell(cpuCell(r, 'idle_cpu_percent', 1))} | ${cell(formatNumber(figureValue(r, 'backlog_mb'), 1))} | ${cell(postgresWorkCell(r))} | ` +
        `${good ? 'yes' : `**FAILED**: ${(r.failure ?? '').replaceAll('|', '\\|').replaceAll('\n', ' ')}`} |`
      );
    }),
    '',
    'Per process:',
    '',
    '| System | Variant | Process | Peak memory (MB) | With the backlog (MB) | CPU s per 1,000 enqueued | CPU s per 1,000 processed | CPU idle (% of a core) | Live heap idle / backlogged / processed (MB) | With the backlog after a full collection (MB) |',
    '| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...results.filter(ok).flatMap(processRows),
    '',
    'CPU: user + system seconds per 1,000 jobs of the system’s processes, and of the bench process where the workers run in it (a client only is shown apart); idle: the set-up system over 2 s with nothing to do (or as the notes say, with --idle-seconds), which every phase pays for as long as it lasts. Memory: resident (VmRSS), sampled every 250 ms; Postgres backends: the connections to the run’s database summed, their own pages only (RssAnon; the shared buffers and the server’s background processes are not attributed). Live heap: where the system runs Node processes of its own, each was made to collect its garbage and reported the JavaScript objects it still held — at rest before the enqueue, with the backlog (right after its memory with the backlog was read; its resident memory then is the last column) and once every job was processed; resident memory alone counts heap V8 has not collected yet, and a process that kept something per job would hold more after the processing than at rest. Δ: a server the machine shares (its nats-server, its Redis): its growth over the run, and CPU time that includes any other use meanwhile. Postgres per job: transactions that wrote (each takes a transaction id) and bytes of WAL, from the server’s own counters between the phase’s start and end — exact where CPU moves by ±10 % between runs; the enqueue’s runs until the workers start, so what a system writes after answering (Sluice’s relay marking the creates’ events) is the enqueue’s.',
  ];
}
