/**
 * Group writes to Postgres: items that arrive while an earlier write is on its way wait for it and
 * then go together, in one statement and one commit. Under load the statements per item fall as
 * the concurrency rises, while an idle executor still writes each item at once, without waiting to
 * gather more. The executor group-starts steps (`startUsualSteps`) and group-commits their outcomes
 * (`recordStepOutcomes`) this way.
 */
import { isDeadlock } from '@sluice/db';

/** Items per statement at most (a burst larger than this takes several writes in a row). */
export const MAX_ITEMS_PER_WRITE = 64;

/**
 * How many times a write Postgres failed to break a deadlock is tried (it changed nothing). The
 * statements lock their tasks in id order, so only a writer taking task rows in another order can
 * close such a cycle, and rarely.
 */
const DEADLOCK_TRIES = 3;

/** Writes items in one statement, answering for each, in order. */
export type GroupWrite<Item, Answer> = (items: Item[]) => Promise<Answer[]>;

interface Waiting<Item, Answer> {
  readonly item: Item;
  resolve(answer: Answer): void;
  reject(error: unknown): void;
}

/** Writes items, gathering those that arrive while a write is in flight. */
export class GroupWriter<Item, Answer> {
  private waiting: Array<Waiting<Item, Answer>> = [];
  private writing = false;

  constructor(
    private readonly writer: GroupWrite<Item, Answer>,
    private readonly maxPerWrite = MAX_ITEMS_PER_WRITE,
  ) {}

  /** Writes `item`; resolves with its answer once its write committed, rejects when it failed. */
  write(item: Item): Promise<Answer> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ item, resolve, reject });
      if (!this.writing) void this.writeAll();
    });
  }

  private async writeAll(): Promise<void> {
    this.writing = true;
    try {
      while (this.waiting.length > 0) {
        const batch = this.waiting.splice(0, this.maxPerWrite);
        try {
          const answers = await this.writeTrying(batch.map((w) => w.item));
          batch.forEach((w, index) => w.resolve(answers[index] as Answer));
        } catch (error) {
          for (const w of batch) w.reject(error);
        }
      }
    } finally {
      this.writing = false;
    }
  }

  private async writeTrying(items: Item[]): Promise<Answer[]> {
    for (let tries = 1; ; tries++) {
      try {
        return await this.writer(items);
      } catch (error) {
        if (!isDeadlock(error) || tries >= DEADLOCK_TRIES) throw error;
      }
    }
  }
}
