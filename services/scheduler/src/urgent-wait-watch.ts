/**
 * Runs the urgent-wait guard (urgent-wait-guard.ts): while it watches, reads the P0 waits and the
 * steps in flight from Postgres every `READ_INTERVAL_MS` (one statement), moves the caps on, and
 * reports them — a gauge per capped resource, a log line when a resource's cap is set or lifted,
 * a wake-up of the dispatcher when a cap rose or went (steps it held back may be admitted now), and
 * the caps themselves to the gateways after each reading while any is in place, then once more,
 * empty, when the last is lifted (so `GetTask` can say why a lower-priority task waits; see
 * @sluice/bus guard-caps.ts). Without P0 work it reads nothing.
 */
import { readUrgentWaits, type Database } from '@sluice/db';
import type { Logger, Metrics } from '@sluice/telemetry';
import { startBatchLoop, type BatchLoop } from './batch-loop.js';
import { READ_INTERVAL_MS, type UrgentWaitGuard } from './urgent-wait-guard.js';

export interface UrgentWaitWatchDeps {
  readonly db: Database;
  readonly guard: UrgentWaitGuard;
  readonly log: Logger;
  readonly metrics: Metrics;
  /** A cap rose or was lifted: the dispatcher should look again. */
  readonly onCapsRaised: () => void;
  /** Tells the gateways the caps in place (empty: none any more). */
  readonly publishCaps: (caps: Readonly<Record<string, number>>) => void;
}

export function startUrgentWaitWatch(deps: UrgentWaitWatchDeps): BatchLoop {
  const { guard, log, metrics } = deps;
  /** The latest start read (Postgres's clock); dropped while the guard does not watch. */
  let cursor: string | undefined;
  /** Whether the gateways were last told of caps (so a lift is told once, as an empty notice). */
  let capsAnnounced = false;
  return startBatchLoop({
    name: 'urgent-wait-guard',
    pollMs: READ_INTERVAL_MS,
    log,
    runBatch: async () => {
      if (!guard.watching(Date.now())) {
        cursor = undefined;
        return false;
      }
      const reading = await readUrgentWaits(deps.db, cursor, READ_INTERVAL_MS);
      cursor = reading.cursor;
      let raised = false;
      for (const change of guard.assess(reading, Date.now())) {
        const { previous } = change;
        if (change.cap === undefined) {
          metrics.urgentGuardCap.remove({ resource: change.resource });
          log.info({ resource: change.resource }, 'P0 work has stopped; lower priorities uncapped');
          raised = true;
          continue;
        }
        metrics.urgentGuardCap.set({ resource: change.resource }, change.cap);
        if (previous === undefined && change.waitMs === undefined) {
          log.info(
            { resource: change.resource, cap: change.cap },
            'P0 work has begun; lower priorities capped until its waits are known',
          );
        } else if (previous === undefined) {
          log.info(
            { resource: change.resource, cap: change.cap, p90_wait_ms: change.waitMs },
            'P0 steps wait longer than the target; lower priorities capped',
          );
        } else {
          log.debug(
            { resource: change.resource, cap: change.cap, p90_wait_ms: change.waitMs },
            'cap moved',
          );
        }
        if (previous !== undefined && change.cap > previous) raised = true;
      }
      if (raised) deps.onCapsRaised();
      const caps = guard.caps();
      const capped = Object.keys(caps).length > 0;
      if (capped || capsAnnounced) deps.publishCaps(caps);
      capsAnnounced = capped;
      return false;
    },
  });
}
