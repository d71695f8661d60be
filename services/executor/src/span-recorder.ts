/**
 * For unit tests: an in-memory span processor to hand to `startTracing`, which keeps every ended
 * span and lets a test wait for the one it expects (spans of HTTP requests end when their response
 * body is read, a little after the caller's promise settles). The executor depends on the SDK
 * only through `@sluice/telemetry`, so the types come from its options.
 */
import type { TracingOptions } from '@sluice/telemetry';

/** The SDK's `SpanProcessor`. */
export type SpanProcessor = NonNullable<TracingOptions['spanProcessors']>[number];
/** The SDK's `ReadableSpan`: an ended span as exporters see it. */
export type RecordedSpan = Parameters<SpanProcessor['onEnd']>[0];

/** A span processor that records ended spans. */
export interface SpanRecorder extends SpanProcessor {
  /** Every span ended so far, in the order they ended. */
  readonly spans: RecordedSpan[];
  /** Resolves with the first ended span `predicate` accepts, waiting up to `timeoutMs`. */
  waitFor(predicate: (span: RecordedSpan) => boolean, timeoutMs?: number): Promise<RecordedSpan>;
  /** Forgets the spans recorded so far. */
  clear(): void;
}

export function createSpanRecorder(): SpanRecorder {
  const spans: RecordedSpan[] = [];
  const watchers = new Set<() => void>();
  return {
    spans,
    onStart: () => undefined,
    onEnd(span) {
      spans.push(span);
      for (const watcher of [...watchers]) watcher();
    },
    forceFlush: () => Promise.resolve(),
    shutdown: () => Promise.resolve(),
    clear: () => void spans.splice(0),
    waitFor(predicate, timeoutMs = 5_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const found = spans.find(predicate);
          if (found === undefined) return;
          clearTimeout(timer);
          watchers.delete(check);
          resolve(found);
        };
        const timer = setTimeout(() => {
          watchers.delete(check);
          reject(new Error(`no such span ended within ${timeoutMs} ms`));
        }, timeoutMs);
        watchers.add(check);
        check();
      });
    },
  };
}
