/**
 * The creates of the overload benchmark's load phase: a P3 flood paced in waves over
 * `floodSeconds`, beside a steady P0 stream that goes on until stopped.
 */
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';

export type Priority = 'PRIORITY_P0' | 'PRIORITY_P3';

export interface LoadSendsOptions {
  /** P3 tasks in the flood. */
  readonly p3: number;
  /** Seconds the flood's creates are spread over. */
  readonly floodSeconds: number;
  readonly p0PerSecond: number;
  /** When the load started (`performance.now()`): the sends are paced from it. */
  readonly started: number;
  /** Creates the task of `key` (retrying what is worth retrying); resolves with its id. */
  readonly submit: (key: string, priority: Priority) => Promise<string>;
  /** Aborted when the benchmark stops early: no more sends are made. */
  readonly signal: AbortSignal;
}

/**
 * The flood's and the stream's sends, as they are made. Each create's failure is caught as it
 * happens: a rejection left unhandled until the phase awaited it would end the process before its
 * cleanup (the stack, the fake LLM, the database). Once a create failed no more are made.
 */
export class LoadSends {
  readonly p3Keys: string[] = [];
  readonly p0Keys: string[] = [];
  /** Seconds from the start until every P3 create was accepted; undefined until then. */
  floodSeconds: number | undefined;
  /** The first create that failed (an error the submitter does not retry): the load has failed. */
  failure: { readonly key: string; readonly error: unknown } | undefined;
  private streaming = true;
  private readonly submits: Array<Promise<void>> = [];
  private readonly loops: Promise<void>;

  constructor(private readonly options: LoadSendsOptions) {
    this.loops = Promise.all([this.flood(), this.stream()]).then(() => undefined);
  }

  /** Ends the P0 stream. */
  stop(): void {
    this.streaming = false;
  }

  /**
   * Resolves once the flood and the stream have ended and every create made was answered; rejects
   * with the first failure then.
   */
  async settled(): Promise<void> {
    await this.loops;
    await Promise.all(this.submits);
    if (this.failure !== undefined) throw this.failure.error;
  }

  private send(key: string, priority: Priority): void {
    this.submits.push(
      this.options.submit(key, priority).then(
        () => undefined,
        (error: unknown) => {
          this.failure ??= { key, error };
        },
      ),
    );
  }

  private sending(): boolean {
    return this.failure === undefined && !this.options.signal.aborted;
  }

  private async flood(): Promise<void> {
    const { p3, floodSeconds, started } = this.options;
    const wave = 10;
    const waveMs = (floodSeconds * 1_000 * wave) / p3;
    for (let i = 0; i < p3 && this.sending(); i += wave) {
      for (let j = i; j < Math.min(p3, i + wave); j++) {
        const key = `p3-${j}`;
        this.p3Keys.push(key);
        this.send(key, 'PRIORITY_P3');
      }
      const next = started + ((i + wave) / wave) * waveMs;
      await sleep(Math.max(0, next - performance.now()));
    }
    await Promise.all(this.submits.slice());
    if (!this.sending()) return;
    this.floodSeconds = (performance.now() - started) / 1_000;
  }

  private async stream(): Promise<void> {
    const { p0PerSecond, started } = this.options;
    const everyMs = 1_000 / p0PerSecond;
    for (let i = 0; this.streaming && this.sending(); i++) {
      const key = `load-p0-${i}`;
      this.p0Keys.push(key);
      this.send(key, 'PRIORITY_P0');
      await sleep(Math.max(0, started + (i + 1) * everyMs - performance.now()));
    }
  }
}
