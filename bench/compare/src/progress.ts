/** One line of progress on stderr: rewritten in place on a terminal, every few seconds otherwise. */
import { performance } from 'node:perf_hooks';

const PLAIN_INTERVAL_MS = 2_000;

export class Progress {
  private last = -Infinity;
  private shown = false;

  constructor(private readonly enabled = true) {}

  /** Shows `text` as the current state (throttled when stderr is not a terminal). */
  update(text: string): void {
    if (!this.enabled) return;
    if (process.stderr.isTTY) {
      process.stderr.write(`\r\x1b[2K${text}`);
      this.shown = true;
    } else if (performance.now() - this.last >= PLAIN_INTERVAL_MS) {
      this.last = performance.now();
      process.stderr.write(`${text}\n`);
    }
  }

  /** A line that stays (a phase done, a result). */
  log(text: string): void {
    if (!this.enabled) return;
    this.clear();
    process.stderr.write(`${text}\n`);
  }

  clear(): void {
    if (this.shown) process.stderr.write('\r\x1b[2K');
    this.shown = false;
  }
}
