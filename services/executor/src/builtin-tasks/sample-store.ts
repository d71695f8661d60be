/**
 * Where the `document-ingestion` sample writes its rows: the table `sluice_samples.ingested_rows`,
 * created on first use, in the database that `SLUICE_SAMPLES_DATABASE_URL` names (by default the
 * executor's own `DATABASE_URL`). A schema of its own keeps the sample's data apart from Sluice's
 * tables, which it never touches; Sluice's migrations know nothing of it.
 *
 * Each `db` step opens one connection and closes it when done: steps are batch writes, seconds
 * apart, and an idle pool would outlive the executor's orderly shutdown.
 */
import { openDatabase } from '@sluice/db';
import type { Json } from '@sluice/core';

/** The table rows go to. */
export const SAMPLE_TABLE = 'sluice_samples.ingested_rows';

/** The database of the samples, from the environment. */
export function samplesDatabaseUrl(env: NodeJS.ProcessEnv = process.env): string {
  const url = env.SLUICE_SAMPLES_DATABASE_URL ?? env.DATABASE_URL;
  if (!url) {
    throw new Error(
      'the document-ingestion sample needs SLUICE_SAMPLES_DATABASE_URL or DATABASE_URL',
    );
  }
  return url;
}

/** Rows of one document of one task. */
export interface DocumentRows {
  readonly taskId: string;
  readonly document: number;
  readonly name: string;
  readonly rows: ReadonlyArray<Record<string, Json>>;
}

/**
 * Runs `work` with a one-connection client of the samples database, aborted (the connection
 * closed) when `signal` fires.
 */
async function withSamplesDatabase<T>(
  signal: AbortSignal,
  work: (sql: ReturnType<typeof openDatabase>['sql']) => Promise<T>,
): Promise<T> {
  signal.throwIfAborted();
  const handle = openDatabase(samplesDatabaseUrl(), {
    max: 1,
    applicationName: 'sluice-sample-ingestion',
  });
  const abort = () => void handle.close(0);
  signal.addEventListener('abort', abort, { once: true });
  try {
    return await work(handle.sql);
  } finally {
    signal.removeEventListener('abort', abort);
    await handle.close();
  }
}

/**
 * Writes the rows of one document, once: the key is (task, document, row), so a retried step (same
 * task, same document) inserts nothing twice. Returns how many rows this call inserted and how
 * many were there already.
 */
export async function writeDocumentRows(
  rows: DocumentRows,
  signal: AbortSignal,
): Promise<{ inserted: number; existing: number }> {
  if (rows.rows.length === 0) return { inserted: 0, existing: 0 };
  return withSamplesDatabase(signal, (sql) =>
    sql.begin(async (tx) => {
      // Concurrent `create … if not exists` of one table can collide in the catalog: serialise.
      await tx`select pg_advisory_xact_lock(hashtext(${SAMPLE_TABLE}))`;
      await tx`create schema if not exists sluice_samples`;
      await tx`
        create table if not exists sluice_samples.ingested_rows (
          task_id uuid not null,
          document integer not null,
          row_index integer not null,
          document_name text not null,
          data jsonb not null,
          written_at timestamptz not null default now(),
          primary key (task_id, document, row_index)
        )`;
      // One jsonb parameter for all rows, numbered by Postgres (the pool of `@sluice/db` hands
      // JSON to Postgres as text).
      const result = await tx`
        insert into sluice_samples.ingested_rows (task_id, document, row_index, document_name, data)
        select ${rows.taskId}::uuid, ${rows.document}::int, (ord - 1)::int, ${rows.name}, value
        from jsonb_array_elements(${JSON.stringify(rows.rows)}::jsonb) with ordinality as e(value, ord)
        on conflict do nothing`;
      return { inserted: result.count, existing: rows.rows.length - result.count };
    }),
  );
}

/** How many rows of a task are stored, by document index. */
export async function countTaskRows(
  taskId: string,
  signal: AbortSignal,
): Promise<Map<number, number>> {
  return withSamplesDatabase(signal, async (sql) => {
    const [table] = await sql<Array<{ exists: boolean }>>`
      select to_regclass(${SAMPLE_TABLE}) is not null as exists`;
    if (!table?.exists) return new Map<number, number>();
    const rows = await sql<Array<{ document: number; count: number }>>`
      select document, count(*)::int as count
      from sluice_samples.ingested_rows
      where task_id = ${taskId}
      group by document`;
    return new Map(rows.map((row): [number, number] => [row.document, row.count]));
  });
}
