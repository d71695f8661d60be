/**
 * Records the stream sequence of each published dispatch (`publish_seq`) a little later, for all
 * the dispatch passes of that while in one statement, instead of one statement per pass.
 *
 * The sequence tells the reconciler that a dispatched step's message exists (and where): a step
 * still `dispatched` without one after the dispatch grace counts as never published and goes back
 * to the ready queue. An executor's start records the sequence of the message it came in, so by
 * the time the delay is over most steps have theirs and the statement changes only the steps still
 * waiting in the stream. Keep the delay well under the grace (the scheduler uses a quarter of it,
 * at most a second): a record the scheduler dies before writing only makes a waiting step look
 * unpublished, and the reconciler dispatches it again under a new dispatch number (the old message
 * is then refused by its start) — the same as a death between claim and publish.
 */
import { recordPublishSeqs, type Database } from '@sluice/db';
import type { Logger } from '@sluice/telemetry';

/** One published dispatch: the step, its dispatch number and the stream sequence it got. */
export interface PublishedDispatch {
  readonly stepId: number;
  readonly dispatch: number;
  readonly publishSeq: number;
}

/** Where the dispatcher puts its publications (see `DispatcherDeps.publications`). */
export interface PublicationSink {
  record(published: readonly PublishedDispatch[]): void | Promise<void>;
}

/** Rows per statement (three parameters each; Postgres allows 65,535 parameters). */
const ROWS_PER_WRITE = 1_000;
/** Records kept for another try while Postgres fails; beyond, the oldest are given up (logged). */
const MAX_PENDING = 100_000;

export interface PublicationRecorderOptions {
  readonly db: Database;
  readonly log: Logger;
  /** How long a record waits, gathering others, before it is written. */
  readonly delayMs: number;
}

export class PublicationRecorder implements PublicationSink {
  #pending: PublishedDispatch[] = [];
  #timer: NodeJS.Timeout | undefined;
  /** The latest write; writes follow one another (it never rejects: failures are kept). */
  #writing: Promise<void> = Promise.resolve();
  #stopped = false;

  constructor(private readonly options: PublicationRecorderOptions) {}

  record(published: readonly PublishedDispatch[]): void {
    if (published.length === 0) return;
    if (this.#stopped) throw new Error('publication recorder stopped');
    this.#pending.push(...published);
    this.#schedule();
  }

  /** Writes what is pending now (tests, and `stop`). */
  flush(): Promise<void> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#writing = this.#writing.then(() => this.#writePending());
    return this.#writing;
  }

  /** Writes what is pending and records no more; call before the database closes. */
  async stop(): Promise<void> {
    this.#stopped = true;
    await this.flush();
  }

  #schedule(): void {
    if (this.#timer !== undefined || this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      void this.flush();
    }, this.options.delayMs);
  }

  async #writePending(): Promise<void> {
    while (this.#pending.length > 0) {
      const batch = this.#pending.splice(0, ROWS_PER_WRITE);
      try {
        await recordPublishSeqs(this.options.db, batch);
      } catch (error) {
        this.#keepForRetry(batch, error);
        return;
      }
    }
  }

  /** A failed write (Postgres down) is tried again after the delay, with what came meanwhile. */
  #keepForRetry(batch: PublishedDispatch[], error: unknown): void {
    this.#pending.unshift(...batch);
    const dropped = this.#pending.length - MAX_PENDING;
    if (dropped > 0) this.#pending.splice(0, dropped);
    this.options.log.warn(
      { err: error, pending: this.#pending.length, given_up: Math.max(0, dropped) },
      'could not record publication sequences; trying again (the reconciler re-dispatches steps left without one)',
    );
    this.#schedule();
  }
}
