/**
 * The urgent claim: P0 steps claimed in the transaction that created them, so an interactive
 * task's first step needs no wake-up of the scheduler, no pass of its and no claim transaction of
 * its own before it is published (the gateway publishes it after the commit; see the gateway's
 * urgent-dispatch.ts). Under a backlog of lower priorities those legs were most of a P0 step's
 * wait at the onset of P0 work (issue 7, sessions 14–15).
 *
 * It is the scheduler's claim with every lower priority held: the same admission rules (limits,
 * tenant caps, the governor's limits, throttles and open breakers), so it admits nothing the
 * scheduler would not, and it may also admit older ready P0 steps of the same resources (most
 * urgent and oldest first, fair between tenants, as any claim).
 *
 * Creates must never queue on admission: the resource's admission lock is only tried
 * (`pg_try_advisory_xact_lock`); when a scheduler's claim holds it, nothing is claimed here and
 * the scheduler, woken by the create as before, admits the step.
 */
import { sql, TransactionRollbackError, type SQL } from 'drizzle-orm';
import type { Priority } from '@sluice/core';
import type { Database, Transaction } from '../client.js';
import { ADMISSION_LOCK_NAMESPACE, admissionLockKeyOf, recordAdmissionKeys } from './admission.js';
import { textArrayOf } from './batch-input.js';
import { genericPlansForTransaction } from './plan-cache.js';
import {
  claimReadyStepsStatement,
  claimedStepsOf,
  type AdmissionSettings,
  type ClaimRow,
  type ClaimedStep,
} from './claim.js';

/** Every priority but P0: what the urgent claim holds back. */
const LOWER_PRIORITIES: readonly Priority[] = [1, 2, 3];

/**
 * Claims up to `limit` ready P0 steps of `resources` within `admission`, in the caller's
 * transaction (after it inserted them: the claim sees its own rows), taking each resource's
 * admission lock only when it is free. The claimed steps are `dispatched` once the transaction
 * commits; the caller publishes them then, and releases those it could not publish (as the
 * scheduler's dispatcher does). A crash between the commit and the publication leaves them to
 * the reconciler, as for the scheduler's claims.
 */
export async function claimUrgentSteps(
  tx: Transaction,
  resources: readonly string[],
  limit: number,
  admission: AdmissionSettings,
): Promise<ClaimedStep[]> {
  const statements = urgentClaimStatements(resources, limit, admission);
  if (statements.length === 0) return [];
  // Started in order, answered in one round trip (postgres.js pipelines a transaction's
  // statements on its connection).
  const answers = await Promise.all(statements.map((statement) => tx.execute(statement)));
  return urgentClaimedOf(answers[answers.length - 1] ?? []);
}

/**
 * The urgent claim's statements, to run in this order in the creating transaction (none when there
 * is nothing to claim); the last one answers the claimed steps' rows ({@link urgentClaimedOf}).
 * A create whose transaction goes out in one write (task-batch.ts) sends them with it.
 */
export function urgentClaimStatements(
  resources: readonly string[],
  limit: number,
  admission: AdmissionSettings,
): readonly SQL[] {
  if (resources.length === 0 || limit <= 0) return [];
  const urgentOnly: AdmissionSettings = {
    ...admission,
    heldPriorities: [...new Set([...(admission.heldPriorities ?? []), ...LOWER_PRIORITIES])],
  };
  return [
    // The claim is planned once per connection, not on each of its first executions: a custom
    // plan of this statement costs 2–4 ms of planning (idle), which every gateway connection paid
    // on its first P0 creates — at the onset of P0 work, when the machine is busiest (session 17).
    genericPlansForTransaction(),
    // The claim runs after the locking statement, in a snapshot of its own, and claims only where
    // this transaction got the lock (the locking statement records which, `recordAdmissionKeys`).
    sql`
      with tried as materialized (
        select key, pg_try_advisory_xact_lock(${ADMISSION_LOCK_NAMESPACE}::int, key) as locked
        from (select ${admissionLockKeyOf(sql`r`)} as key
              from unnest(${textArrayOf([...new Set(resources)])}) r) k
      )
      select ${recordAdmissionKeys(sql`key`, sql`locked`)} from tried
    `,
    claimReadyStepsStatement(limit, urgentOnly, 'locked'),
  ];
}

/** The steps the last of {@link urgentClaimStatements} claimed, from its rows. */
export function urgentClaimedOf(rows: readonly Record<string, unknown>[]): ClaimedStep[] {
  return claimedStepsOf(rows as unknown as readonly ClaimRow[]);
}

/**
 * Plans the urgent claim on up to `connections` connections of `db`'s pool ahead of the first P0
 * creates: each runs it once, in a transaction that is rolled back, on a resource no step has (so
 * it locks nothing another claimer takes and claims nothing). Planned on first use instead, the
 * statement costs 17–22 ms on an idle machine, several times that under load, and a create plans
 * it after taking the resource's admission lock: at the onset of P0 work in a backlog, the first
 * creates on each connection held the lock through their planning, made the next creates' tries
 * fail and left their steps to the scheduler (issue 7, session 18). A connection the pool opens
 * later (after a reconnect) plans on its first create, as before.
 */
export async function prepareUrgentClaim(
  db: Database,
  connections: number,
  admission: AdmissionSettings,
): Promise<void> {
  await Promise.all(
    Array.from({ length: connections }, () =>
      db
        .transaction(async (tx) => {
          await claimUrgentSteps(tx, [NO_RESOURCE], 1, admission);
          tx.rollback();
        })
        .catch((error: unknown) => {
          if (!(error instanceof TransactionRollbackError)) throw error;
        }),
    ),
  );
}

/** A resource name no step can have (resource names are never empty). */
const NO_RESOURCE = '';
