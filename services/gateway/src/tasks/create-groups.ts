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
 *   group was written. A deadlock is tried again by the group writer.
 */
import { ROOT_CONTEXT, context } from '@opentelemetry/api';
import { SluiceErrorCode, isSluiceError, type Priority } from '@sluice/core';
import {
  GroupWriter,
  isWriteRefused,
  submitTasksClaiming,
  type ClaimedStep,
  type Database,
  type NewTask,
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

/** Writes creates, a tenant's concurrent ones together. */
export class CreateGroups {
  private readonly writers = new Map<string, GroupWriter<NewTask, Settled>>();

  constructor(
    private readonly deps: CreateGroupsDeps,
    private readonly maxPerWrite = MAX_CREATES_PER_WRITE,
  ) {}

  /**
   * Writes `task` (checked, with its trace parent); resolves once its write committed and its
   * claimed steps were published.
   *
   * @throws the `already_exists` {@link SluiceError} of a key reused with other input, or the
   *   database's error.
   */
  async write(task: NewTask): Promise<GroupedCreate> {
    const writer = this.writerOf(task.tenantId);
    try {
      // Outside the caller's trace: a write started here may go on to write other callers' groups
      // (and log about them), which belong to no one caller's trace.
      const settled = await context.with(ROOT_CONTEXT, () => writer.write(task));
      if ('error' in settled) throw settled.error;
      return settled.grouped;
    } finally {
      // Forget a tenant's writer once it has nothing to do: the map holds busy tenants only.
      if (writer.idle && this.writers.get(task.tenantId) === writer) {
        this.writers.delete(task.tenantId);
      }
    }
  }

  private writerOf(tenantId: string): GroupWriter<NewTask, Settled> {
    let writer = this.writers.get(tenantId);
    if (!writer) {
      writer = new GroupWriter(
        (tasks: NewTask[]) => this.writeGroup(tasks),
        this.maxPerWrite,
        (task) => task.idempotencyKey,
      );
      this.writers.set(tenantId, writer);
    }
    return writer;
  }

  private async writeGroup(tasks: NewTask[]): Promise<Settled[]> {
    let submitted: SubmittedTasks;
    try {
      submitted = await submitTasksClaiming(
        this.deps.db,
        tasks,
        this.deps.urgentClaimFor(tasks.map((task) => task.priority)),
      );
    } catch (error) {
      // A key reused with other input, or data Postgres cannot store, refuses the whole group,
      // which rolled back: write each create alone so that the others are not refused for it.
      const refusedForOne =
        isSluiceError(error, SluiceErrorCode.AlreadyExists) || isWriteRefused(error);
      if (tasks.length === 1 || !refusedForOne) throw error;
      return Promise.all(tasks.map((task) => this.writeAlone(task)));
    }
    // Committed: from here on nothing may fail the group (the group writer would write it again).
    await this.deps.afterCommit(submitted.claimed);
    return submitted.results.map((result) => ({
      grouped: { result, claimed: submitted.claimed, groupSize: tasks.length },
    }));
  }

  private async writeAlone(task: NewTask): Promise<Settled> {
    try {
      const [settled] = await this.writeGroup([task]);
      if (!settled) throw new Error('the create answered nothing');
      return settled;
    } catch (error) {
      return { error };
    }
  }
}
