/**
 * Keeps the planner's statistics of the queue tables up with their growth: every check, the queue
 * tables that changed by as many rows as they held at their last analysis are analyzed (see
 * `queueTablesDueForAnalyze` for why autovacuum alone leaves a young deployment on plans made for
 * empty tables). Any replica may run it; one analysis at a time serves them all.
 */
import { analyzeQueueTables, queueTablesDueForAnalyze, type Database } from '@sluice/db';
import type { Logger } from '@sluice/telemetry';

/** What a statistics check needs. */
export interface TableStatisticsDeps {
  readonly db: Database;
  readonly log: Logger;
}

/** One check (and analysis, when due); never asks to run again at once. */
export async function refreshQueueTableStatistics(deps: TableStatisticsDeps): Promise<boolean> {
  const due = await queueTablesDueForAnalyze(deps.db);
  if (due.length === 0) return false;
  const started = performance.now();
  if (await analyzeQueueTables(deps.db, due)) {
    deps.log.debug(
      { tables: due, duration_ms: Math.round(performance.now() - started) },
      'analyzed queue tables that outgrew their statistics',
    );
  }
  return false;
}
