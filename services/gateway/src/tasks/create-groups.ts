/**
 * Group commit of `CreateTask`: the creates of a tenant that arrive while an earlier create of
 * that tenant is being written wait for that write, then go together in one statement and one
 * transaction, as a `CreateTasks` batch does. An idle gateway writes a create at once; under load
 * the commits, statements and round trips per create fall as the concurrency rises, and P0 creates
 * written together take the admission lock once for their urgent claim instead of each trying it.
 *
 * Each caller still gets its own answer:
 * - two creates with one idempotency key never share a write (the later goes in the next one and
 *   finds the first's task);
 * - a key reused with other input rolls the whole group back (`already_exists`), as does data
 *   Postgres refuses to store (`isWriteRefused`), so the group is then written one create at a
 *   time, and only the offending call fails;
 * - any other failure (the database unavailable) fails the group's calls with it; nothing of the
 *   group was written. A deadlock is tried again by the group writer;
 * - creates checked against remembered reads (remembered-reads.ts) are written on condition that
 *   those still hold; when one does not, they fail with `StaleReads` and the group's other
 *   creates are written again without them.
 */
import { ROOT_CONTEXT, context } from '@opentelemetry/api';
import { SluiceErrorCode, isSluiceError, type Priority } from '@sluice/core';
import {
  GroupWriter,
  StaleReads,
  isWriteRefused,
  submitTasksClaiming,
  type ClaimedStep,
  type Database,
  type NewTask,
  type RememberedReads,
  type SubmitTaskResult,
  type SubmittedTasks,
  type UrgentClaim,
} from '@sluice/db';

/** Creates in one write at most (more wait for the next). */
export const MAX_CREATES_PER_WRITE = 64;

/** What a create got from its group's write. */
export interface GroupedCreate {
  readonly result: SubmitTaskResult;
  /** The P0 steps the group's transaction claimed (already published when this is answered). */
  readonly claimed: readonly ClaimedStep[];
  /** How many creates the write held (1: written alone). */
  readonly groupSize: number;
}

/** What {@link CreateGroups} needs. */
export interface CreateGroupsDeps {
  readonly db: Database;
  /** How a write of these priorities claims its P0 steps, read when the write starts. */
  urgentClaimFor(priorities: readonly Priority[]): UrgentClaim | undefined;
  /**
   * Runs once a write committed, before its creates are answered: publishes what it claimed. Must
   * not reject (the tasks exist; a step it could not publish is left to the reconciler).
   */
  afterCommit(claimed: readonly ClaimedStep[]): Promise<void>;
}

/** One create's answer, or the error its own write failed with. */
type Settled = { readonly grouped: GroupedCreate } | { readonly error: unknown };

/** A create to write, with the remembered reads it was checked with, if any. */
interface PendingCreate {
  readonly task: NewTask;
  readonly remembered?: RememberedReads;
}

/** Writes creates, a tenant's concurrent ones together. */
export class CreateGroups {
  private readonly writers = new Map<string, GroupWriter<PendingCreate, Settled>>();

  constructor(
    private readonly deps: CreateGroupsDeps,
    private readonly maxPerWrite = MAX_CREATES_PER_WRITE,
  ) {}

  /**
   * Writes `task` (checked, with its trace parent); resolves once its write committed and its
   * claimed steps were published. With `remembered`, the task was checked against those reads, and
   * is written only if they still hold.
   *
   * @throws the `already_exists` {@link SluiceError} of a key reused with other input,
   *   {@link StaleReads} when `remembered` no longer holds (nothing of the task was written), or the
   *   database's error.
   */
  async write(task: NewTask, remembered?: RememberedReads): Promise<GroupedCreate> {
    const writer = this.writerOf(task.tenantId);
    const pending: PendingCreate = remembered ? { task, remembered } : { task };
    try {
      // Outside the caller's trace: a write started here may go on to write other callers' groups
      // (and log about them), which belong to no one caller's trace.
      const settled = await context.with(ROOT_CONTEXT, () => writer.write(pending));
      if ('error' in settled) throw settled.error;
      return settled.grouped;
    } finally {
      // Forget a tenant's writer once it has nothing to do: the map holds busy tenants only.
      if (writer.idle && this.writers.get(task.tenantId) === writer) {
        this.writers.delete(task.tenantId);
      }
    }
  }

  private writerOf(tenantId: string): GroupWriter<PendingCreate, Settled> {
    let writer = this.writers.get(tenantId);
    if (!writer) {
      writer = new GroupWriter(
        (creates: PendingCreate[]) => this.writeGroup(creates),
        this.maxPerWrite,
        (create) => create.task.idempotencyKey,
      );
      this.writers.set(tenantId, writer);
    }
    return writer;
  }

  private async writeGroup(creates: PendingCreate[]): Promise<Settled[]> {
    const tasks = creates.map((create) => create.task);
    let submitted: SubmittedTasks;
    try {
      submitted = await submitTasksClaiming(
        this.deps.db,
        tasks,
        this.deps.urgentClaimFor(tasks.map((task) => task.priority)),
        rememberedOf(creates),
      );
    } catch (error) {
      if (error instanceof StaleReads) return this.writeWithoutStale(creates, error);
      // A key reused with other input, or data Postgres cannot store, refuses the whole group,
      // which rolled back: write each create alone so that the others are not refused for it.
      const refusedForOne =
        isSluiceError(error, SluiceErrorCode.AlreadyExists) || isWriteRefused(error);
      if (creates.length === 1 || !refusedForOne) throw error;
      return Promise.all(creates.map((create) => this.writeAlone(create)));
    }
    // Committed: from here on nothing may fail the group (the group writer would write it again).
    await this.deps.afterCommit(submitted.claimed);
    return submitted.results.map((result) => ({
      grouped: { result, claimed: submitted.claimed, groupSize: tasks.length },
    }));
  }

  /**
   * A group refused for what some of its creates remembered: those fail with `stale` (their
   * callers read again and retry), the others are written again together.
   */
  private async writeWithoutStale(creates: PendingCreate[], stale: StaleReads): Promise<Settled[]> {
    const fresh = creates.filter((create) => create.remembered === undefined);
    const written = fresh.length > 0 ? await this.writeGroup(fresh) : [];
    return creates.map((create) =>
      create.remembered === undefined
        ? (written[fresh.indexOf(create)] as Settled)
        : { error: stale },
    );
  }

  private async writeAlone(create: PendingCreate): Promise<Settled> {
    try {
      const [settled] = await this.writeGroup([create]);
      if (!settled) throw new Error('the create answered nothing');
      return settled;
    } catch (error) {
      return { error };
    }
  }
}

/** The remembered reads of a group's creates together, or none when no create has any. */
function rememberedOf(creates: readonly PendingCreate[]): RememberedReads | undefined {
  const all = creates.flatMap((create) => create.remembered ?? []);
  if (all.length === 0) return undefined;
  return {
    keyHashes: [...new Set(all.flatMap((reads) => reads.keyHashes))],
    types: all.flatMap((reads) => reads.types),
  };
}
