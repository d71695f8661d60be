/**
 * A {@link CompletionWatch} for adapters that are told of each completion as it happens (a worker
 * event, the moment after an ack or a commit): they `record` the id, the watch answers who
 * completed when. The first completion of an id counts; a later one (a duplicate run) is the
 * ledger's to report.
 */
import { epochNow } from './latency.js';
import type { CompletionWatch } from './system.js';

export class CompletionLog implements CompletionWatch {
  private readonly at = new Map<string, number>();
  /** Callbacks of pending `completions` calls, given each newly recorded id. */
  private readonly waiters = new Set<(id: string) => void>();
  private stopped = false;

  /** @param onStop releases what the adapter holds for observing (a subscription, a listener). */
  constructor(private readonly onStop: () => Promise<void> | void = () => undefined) {}

  /** Records that `id` completed now (or at `when`, epoch ms), unless already recorded. */
  record(id: string, when: number = epochNow()): void {
    if (this.stopped || this.at.has(id)) return;
    this.at.set(id, when);
    for (const wake of this.waiters) wake(id);
  }

  async completions(
    ids: readonly string[],
    timeoutMs: number,
  ): Promise<ReadonlyMap<string, number>> {
    const pending = new Set(ids.filter((id) => !this.at.has(id)));
    if (pending.size > 0) {
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          this.waiters.delete(seen);
          resolve();
        };
        const seen = (id: string) => {
          if (pending.delete(id) && pending.size === 0) done();
        };
        const timer = setTimeout(done, timeoutMs);
        this.waiters.add(seen);
      });
    }
    const found = new Map<string, number>();
    for (const id of ids) {
      const when = this.at.get(id);
      if (when !== undefined) found.set(id, when);
    }
    return found;
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    await this.onStop();
  }
}
