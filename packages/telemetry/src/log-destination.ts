/**
 * Where a service's log lines go when no destination is given: stdout, one write per turn of the
 * event loop.
 *
 * pino's default destination hands every line to the libuv threadpool as its own `fs.write`, and
 * each write's completion wakes the event loop again; the process reading stdout (a container
 * runtime, a log shipper, the test harness) is woken once per line too. A service logs at least a
 * line per step it finishes, and finishes steps in groups, so the lines of one turn go out as one
 * write (issue 7: a write and a wake-up per step were a measurable part of a step's CPU). The
 * lines are handed on at the end of the turn they were logged in (`setImmediate`), so nothing
 * waits longer than the turn, and whatever is pending is written synchronously when the process
 * exits.
 */
import { pino } from 'pino';
import type { DestinationStream } from 'pino';

/** The writer the lines are handed to: pino's (sonic-boom) by default, a recorder in tests. */
export interface LineWriter {
  write(text: string): unknown;
  /** Writes everything handed over so far before returning. */
  flushSync(): void;
}

/**
 * A pino destination that hands the lines of one event-loop turn to `writer` as one text.
 * Exported for tests; services get it from {@link stdoutDestination}.
 */
export class TurnBatchedDestination implements DestinationStream {
  #pending: string[] = [];
  #scheduled = false;

  constructor(private readonly writer: LineWriter) {}

  write(line: string): void {
    this.#pending.push(line);
    if (this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(() => this.#handOver());
  }

  /** Hands over what is pending and waits until the writer has written it all. */
  flushSync(): void {
    this.#handOver();
    this.writer.flushSync();
  }

  #handOver(): void {
    this.#scheduled = false;
    if (this.#pending.length === 0) return;
    const text = this.#pending.length === 1 ? this.#pending[0]! : this.#pending.join('');
    this.#pending = [];
    this.writer.write(text);
  }
}

/**
 * The process's stdout as a {@link TurnBatchedDestination}, made once: every logger of the
 * process shares it, so their lines stay in the order they were logged.
 */
export function stdoutDestination(): TurnBatchedDestination {
  if (shared !== undefined) return shared;
  // Asynchronous: a slow reader of stdout holds a threadpool thread, not the event loop.
  const destination = new TurnBatchedDestination(pino.destination({ dest: 1, sync: false }));
  process.once('exit', () => {
    try {
      destination.flushSync();
    } catch {
      // stdout is gone (closed by the reader): there is nowhere left to write the lines.
    }
  });
  shared = destination;
  return destination;
}

let shared: TurnBatchedDestination | undefined;
