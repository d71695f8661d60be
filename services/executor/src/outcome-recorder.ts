/**
 * The executor's group commit of step outcomes. Outcomes that finish while an earlier write is on
 * its way to Postgres wait for it and then go together, in one statement and one commit
 * (`recordStepOutcomes`): under load the commits per step fall as the concurrency rises, while an
 * idle executor still writes each outcome at once, without waiting to gather more.
 */
import type { StepOutcome } from '@sluice/core';
import { isDeadlock, type OutcomeToRecord, type StepDispatchRef } from '@sluice/db';

/** Outcomes per statement at most (a burst larger than this takes several writes in a row). */
export const MAX_OUTCOMES_PER_WRITE = 64;

/**
 * How many times a write Postgres failed to break a deadlock is tried (it changed nothing). The
 * statement locks its tasks in id order, so only a writer taking task rows in another order — the
 * scheduler applying outcomes of the same fan-out — can close such a cycle, and rarely.
 */
const DEADLOCK_TRIES = 3;

/** Writes outcomes in one statement, saying which were recorded (`recordStepOutcomes`). */
export type OutcomeWriter = (items: OutcomeToRecord[]) => Promise<boolean[]>;

interface Waiting {
  readonly item: OutcomeToRecord;
  resolve(recorded: boolean): void;
  reject(error: unknown): void;
}

/** Writes step outcomes, gathering those that arrive while a write is in flight. */
export class OutcomeRecorder {
  private waiting: Waiting[] = [];
  private writing = false;

  constructor(
    private readonly writer: OutcomeWriter,
    private readonly maxPerWrite = MAX_OUTCOMES_PER_WRITE,
  ) {}

  /**
   * Records `outcome` for the dispatch `ref`; resolves once it is committed, with false when the
   * dispatch was stale (see `recordStepOutcome`), and rejects when its write failed.
   */
  record(ref: StepDispatchRef, outcome: StepOutcome): Promise<boolean> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ item: { ref, outcome }, resolve, reject });
      if (!this.writing) void this.writeAll();
    });
  }

  private async writeAll(): Promise<void> {
    this.writing = true;
    try {
      while (this.waiting.length > 0) {
        const batch = this.waiting.splice(0, this.maxPerWrite);
        try {
          const recorded = await this.write(batch.map((w) => w.item));
          batch.forEach((w, index) => w.resolve(recorded[index] === true));
        } catch (error) {
          for (const w of batch) w.reject(error);
        }
      }
    } finally {
      this.writing = false;
    }
  }

  private async write(items: OutcomeToRecord[]): Promise<boolean[]> {
    for (let tries = 1; ; tries++) {
      try {
        return await this.writer(items);
      } catch (error) {
        if (!isDeadlock(error) || tries >= DEADLOCK_TRIES) throw error;
      }
    }
  }
}
