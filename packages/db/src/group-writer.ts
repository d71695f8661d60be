/**
 * Group writes to Postgres: items that arrive while an earlier write is on its way wait for it and
 * then go together, in one statement and one commit. Under load the statements per item fall as
 * the concurrency rises, while an idle writer still writes each item at once, without waiting to
 * gather more. The executor group-starts steps (`startUsualSteps`) and group-commits their outcomes
 * (`recordStepOutcomes`) this way; the gateway group-commits the concurrent creates of a tenant.
 */
import { isDeadlock } from './deadlock.js';

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

/**
 * Items that must not share a write answer the same key (e.g. two creates with one idempotency
 * key: one statement cannot both insert and find the same row); `undefined` goes with anything.
 */
export type ExclusiveKey<Item> = (item: Item) => string | undefined;

/** Writes items, gathering those that arrive while a write is in flight. */
export class GroupWriter<Item, Answer> {
  private waiting: Array<Waiting<Item, Answer>> = [];
  private writing = false;

  constructor(
    private readonly writer: GroupWrite<Item, Answer>,
    private readonly maxPerWrite = MAX_ITEMS_PER_WRITE,
    private readonly exclusiveKey?: ExclusiveKey<Item>,
  ) {}

  /** Nothing waits and nothing is being written. */
  get idle(): boolean {
    return !this.writing && this.waiting.length === 0;
  }

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
        const batch = this.takeBatch();
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

  /**
   * The next write's items, in arrival order: up to the most per write, skipping an item whose
   * exclusive key an earlier one of the batch has (it waits, ahead of later arrivals, for the next).
   */
  private takeBatch(): Array<Waiting<Item, Answer>> {
    const keyOf = this.exclusiveKey;
    if (!keyOf) return this.waiting.splice(0, this.maxPerWrite);
    const batch: Array<Waiting<Item, Answer>> = [];
    const left: Array<Waiting<Item, Answer>> = [];
    const keys = new Set<string>();
    for (const waiting of this.waiting) {
      const key = keyOf(waiting.item);
      if (batch.length >= this.maxPerWrite || (key !== undefined && keys.has(key))) {
        left.push(waiting);
        continue;
      }
      if (key !== undefined) keys.add(key);
      batch.push(waiting);
    }
    this.waiting = left;
    return batch;
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
