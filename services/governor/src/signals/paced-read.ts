/**
 * A signal read from Postgres whose cost grows with the data it summarises, taken again only as
 * often as keeps that cost a bounded share of the time.
 *
 * The count of ready steps is exact, so it reads every ready step: 2–4 ms with an empty queue, 50–
 * 130 ms per read with a backlog of 100,000 (pg_stat_statements, issue 7), which at one read per
 * governor tick (1 s) was 5–13 % of a Postgres core spent on watching the queue, and a backlog of
 * millions would take longer than the tick. The latency windows grow with the rate of work the
 * same way. Levels move on dwell times of seconds, so a reading some seconds old decides as well;
 * a cheap read is still taken at every tick.
 */

/** What a {@link PacedRead} needs. */
export interface PacedReadOptions {
  /**
   * The share of time the read may take: after a read of `d` ms, the next is taken no sooner than
   * `d / dutyShare` ms after this one began (0.05: a read of 100 ms is taken at most every 2 s).
   */
  readonly dutyShare: number;
  readonly now?: () => number;
}

/** The latest value of a read, taken again once its pace allows. */
export class PacedRead<T> {
  readonly #read: () => Promise<T>;
  readonly #dutyShare: number;
  readonly #now: () => number;
  #latest: { value: T; nextAt: number } | undefined;

  constructor(read: () => Promise<T>, options: PacedReadOptions) {
    if (!(options.dutyShare > 0 && options.dutyShare <= 1)) {
      throw new RangeError(`a duty share is in (0, 1], not ${String(options.dutyShare)}`);
    }
    this.#read = read;
    this.#dutyShare = options.dutyShare;
    this.#now = options.now ?? Date.now;
  }

  /**
   * The value of a read taken now, or of the latest one while the pace does not allow another. A
   * failed read is not remembered: it throws, and the next call reads again.
   */
  async get(): Promise<T> {
    const startedAt = this.#now();
    if (this.#latest && startedAt < this.#latest.nextAt) return this.#latest.value;
    const value = await this.#read();
    const tookMs = this.#now() - startedAt;
    this.#latest = { value, nextAt: startedAt + tookMs / this.#dutyShare };
    return value;
  }
}
