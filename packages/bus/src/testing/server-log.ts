/**
 * What a test shows of a private nats-server's log when the server fails: the end of the log, and
 * — when the process died of a Go panic or a fatal runtime error — the panic's own lines first.
 * A panic prints its message and then every goroutine's stack, so the last lines alone are the
 * bottom of some stack and never say what went wrong.
 */

/** Lines kept from the end of the log. */
const TAIL_LINES = 15;
/** Lines kept from the panic on: its message, the goroutine that panicked and its top frames. */
const PANIC_LINES = 12;

const PANIC_START = /^(panic: |fatal error: )/;

export function summarizeServerLog(log: string): string {
  const lines = log.trimEnd().split('\n');
  const tail = lines.slice(-TAIL_LINES);
  const panicAt = lines.findIndex((line) => PANIC_START.test(line));
  if (panicAt === -1 || panicAt >= lines.length - TAIL_LINES) return tail.join('\n');
  const panic = lines.slice(panicAt, Math.min(panicAt + PANIC_LINES, lines.length - TAIL_LINES));
  const skipped = lines.length - TAIL_LINES - (panicAt + panic.length);
  return [...panic, ...(skipped > 0 ? [`… (${String(skipped)} lines)`] : []), ...tail].join('\n');
}
