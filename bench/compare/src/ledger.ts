/**
 * The ledger of one run: every job id the harness sent, and how often a handler started it. A run
 * counts only when each id was handled exactly once — a system that loses or duplicates work is
 * reported as failed, never as a throughput figure (issue 7).
 */
import { performance } from 'node:perf_hooks';
import type { Job, JobHandler } from './system.js';

/** What the ledger found at the end of a run. */
export interface LedgerVerdict {
  readonly expected: number;
  /** Ids handled at least once. */
  readonly handled: number;
  /** Ids never handled. */
  readonly missing: number;
  /** Extra handler starts of ids already handled (2 starts of one id: 1 duplicate). */
  readonly duplicates: number;
  /** Handler starts of ids the harness never sent. */
  readonly unknown: number;
  /** True when every id was handled exactly once and nothing else was. */
  readonly exactlyOnce: boolean;
}

export class Ledger {
  private readonly counts = new Map<string, number>();
  private handledIds = 0;
  private duplicateStarts = 0;
  private unknownStarts = 0;
  /** `performance.now()` of the first and the last first-time handler start. */
  firstAt: number | undefined;
  lastAt: number | undefined;
  private readonly waiters = new Set<() => void>();

  constructor(ids: Iterable<string>) {
    for (const id of ids) {
      if (this.counts.has(id)) throw new Error(`job id ${id} is in the run twice`);
      this.counts.set(id, 0);
    }
  }

  get expected(): number {
    return this.counts.size;
  }

  get handled(): number {
    return this.handledIds;
  }

  get complete(): boolean {
    return this.handledIds === this.counts.size;
  }

  /** Records one handler start of `id`. */
  record(id: string): void {
    const count = this.counts.get(id);
    if (count === undefined) {
      this.unknownStarts += 1;
      return;
    }
    this.counts.set(id, count + 1);
    if (count > 0) {
      this.duplicateStarts += 1;
      return;
    }
    const now = performance.now();
    this.firstAt ??= now;
    this.lastAt = now;
    this.handledIds += 1;
    if (this.complete) for (const wake of this.waiters) wake();
  }

  /** A handler for {@link QueueSystem.startWorkers} that records each job it is given. */
  readonly handler: JobHandler = (job: Job) => {
    this.record(job.id);
    return Promise.resolve();
  };

  /**
   * Resolves true once every id was handled, false when `timeoutMs` passed first (the verdict then
   * shows what is missing).
   */
  async waitComplete(timeoutMs: number): Promise<boolean> {
    if (this.complete) return true;
    return new Promise<boolean>((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        this.waiters.delete(wake);
        resolve(true);
      };
      const timer = setTimeout(() => {
        this.waiters.delete(wake);
        resolve(this.complete);
      }, timeoutMs);
      this.waiters.add(wake);
    });
  }

  verdict(): LedgerVerdict {
    const missing = this.counts.size - this.handledIds;
    return {
      expected: this.counts.size,
      handled: this.handledIds,
      missing,
      duplicates: this.duplicateStarts,
      unknown: this.unknownStarts,
      exactlyOnce: missing === 0 && this.duplicateStarts === 0 && this.unknownStarts === 0,
    };
  }
}

/** One line on what went wrong, for a failed run's table cell. */
export function describeVerdict(verdict: LedgerVerdict): string {
  if (verdict.exactlyOnce) return `all ${verdict.expected} exactly once`;
  const parts = [
    verdict.missing > 0 ? `${verdict.missing} missing` : '',
    verdict.duplicates > 0 ? `${verdict.duplicates} duplicated` : '',
    verdict.unknown > 0 ? `${verdict.unknown} unknown` : '',
  ].filter((p) => p.length > 0);
  return `${parts.join(', ')} of ${verdict.expected}`;
}
