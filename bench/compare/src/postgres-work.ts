/**
 * What a Postgres-based system asks of the server per job: write transactions and WAL bytes,
 * read from two counters the server keeps exactly and at once — the next transaction id (each
 * transaction that writes takes one: a commit, and a rollback after a write, of any statement or
 * block) and the current WAL position. CPU per job moves by ±10 % between runs of the same code on
 * these machines; these counts do not, so they show what a change of statements or batching did
 * in a single run, and compare the systems by the work they make the database do, whatever the
 * machine's hour.
 *
 * Both counters are the server's, not the run's database's (`pg_stat_database` is per database
 * but lags up to a second per backend, and up to ten for an idle one): during a run nothing else
 * writes to the machine's Postgres but the system under test — and the server's own background
 * work for it (autovacuum, checkpoints' full-page images), which is part of its cost.
 */
import type { Figure } from './scenario.js';

/** One reading of the server's counters. */
export interface PostgresWorkMark {
  /** The next transaction id to be assigned (`pg_current_snapshot()`'s `xmax`). */
  readonly nextTransactionId: number;
  /** The WAL insert position in bytes from the start of the WAL (`pg_current_wal_lsn()`). */
  readonly walBytes: number;
}

/** The query every Postgres-based adapter runs for a {@link PostgresWorkMark}. */
export const POSTGRES_WORK_QUERY =
  "select pg_snapshot_xmax(pg_current_snapshot())::text as next_xid, (pg_current_wal_lsn() - '0/0'::pg_lsn)::text as wal_bytes";

/** A row of {@link POSTGRES_WORK_QUERY}: both counters as text (an `xid8` and a `numeric`). */
export interface PostgresWorkRow {
  readonly next_xid: unknown;
  readonly wal_bytes: unknown;
}

/** The mark of a {@link POSTGRES_WORK_QUERY} row; throws on anything else. */
export function postgresWorkOf(row: PostgresWorkRow | undefined): PostgresWorkMark {
  const nextTransactionId = Number(row?.next_xid);
  const walBytes = Number(row?.wal_bytes);
  if (!Number.isSafeInteger(nextTransactionId) || !Number.isSafeInteger(walBytes)) {
    throw new Error(`not a Postgres work reading: ${JSON.stringify(row)}`);
  }
  return { nextTransactionId, walBytes };
}

/** What the server did per job between two marks. */
export interface PostgresWorkPerJob {
  readonly jobs: number;
  /** Transactions that wrote, per job. */
  readonly transactions: number;
  /** Bytes of WAL per job. */
  readonly walBytes: number;
}

export function postgresWorkPerJob(
  from: PostgresWorkMark,
  to: PostgresWorkMark,
  jobs: number,
): PostgresWorkPerJob {
  if (jobs <= 0) throw new RangeError(`jobs must be positive, got ${jobs}`);
  return {
    jobs,
    transactions: (to.nextTransactionId - from.nextTransactionId) / jobs,
    walBytes: (to.walBytes - from.walBytes) / jobs,
  };
}

/** The figures of one phase's work, keyed `pg_transactions_per_job<suffix>` and `pg_wal_kb_per_job<suffix>`. */
export function postgresWorkFigures(
  work: PostgresWorkPerJob,
  phase?: { readonly key: string; readonly label: string },
): Figure[] {
  const key = phase === undefined ? '' : `:${phase.key}`;
  const label = phase === undefined ? '' : `, ${phase.label}`;
  return [
    {
      key: `pg_transactions_per_job${key}`,
      label: `Postgres write transactions per job${label}`,
      value: work.transactions,
      unit: 'transactions',
    },
    {
      key: `pg_wal_kb_per_job${key}`,
      label: `WAL per job${label}`,
      value: work.walBytes / 1024,
      unit: 'KB',
    },
  ];
}

/** A phase's work in words, for the notes: "3.02 write transactions and 7.9 KB of WAL". */
export function describePostgresWork(work: PostgresWorkPerJob): string {
  return `${work.transactions.toFixed(2)} write transactions and ${(work.walBytes / 1024).toFixed(1)} KB of WAL`;
}

/**
 * The server's work between the two moments a {@link CpuPerJobWindow} opens and closes (it tells
 * this window as it does), read as the CPU is: per job that started in between. A reading that
 * fails leaves a note instead of figures; the run goes on.
 */
export class PostgresWorkWindow {
  #opened: { readonly started: number; readonly mark: Promise<PostgresWorkMark> } | undefined;
  #closed: { readonly started: number; readonly mark: Promise<PostgresWorkMark> } | undefined;

  constructor(private readonly read: () => Promise<PostgresWorkMark>) {}

  opened(started: number): void {
    this.#opened ??= { started, mark: this.settled() };
  }

  closed(started: number): void {
    if (this.#opened !== undefined) this.#closed ??= { started, mark: this.settled() };
  }

  /** The window's figures and its note; none when it did not close. */
  async result(): Promise<{ figures: Figure[]; note?: string }> {
    const opened = this.#opened;
    const closed = this.#closed;
    if (opened === undefined || closed === undefined) return { figures: [] };
    try {
      const work = postgresWorkPerJob(
        await opened.mark,
        await closed.mark,
        closed.started - opened.started,
      );
      return {
        figures: postgresWorkFigures(work),
        note: `Postgres per job over the same starts (the server's counters): ${describePostgresWork(work)}`,
      };
    } catch (error) {
      return {
        figures: [],
        note: `Postgres per job: not read (${error instanceof Error ? error.message : String(error)})`,
      };
    }
  }

  /** Starts a reading now; its failure is kept for {@link result}, never unhandled. */
  private settled(): Promise<PostgresWorkMark> {
    const reading = this.read();
    reading.catch(() => undefined);
    return reading;
  }
}
