/**
 * HTTP client spans for what step handlers call. Handlers call `fetch` (Node's bundled undici)
 * directly, for tools, web pages and MCP servers, and the LLM client does too; the undici
 * instrumentation turns each request into a `CLIENT` span (`http.request.method`, `url.full`,
 * `server.address`, `http.response.status_code`, `error.type`) of the active span, and sends the
 * `traceparent` along, so the callee can continue the task's trace.
 *
 * Credentials in the query string (`api_key`, `key`, `token`, `sig` …) are recorded as `REDACTED`
 * (url-redaction.ts).
 *
 * Only requests made inside a span are traced (`requireParentforSpans`): within a step that is its
 * step span or an LLM call's `chat` span; anything else the process fetches stays out of tasks'
 * traces.
 */
import { UndiciInstrumentation } from '@opentelemetry/instrumentation-undici';
import { redactQuery } from './url-redaction.js';

/** The running instrumentation; {@link HttpInstrumentation.stop} unsubscribes it. */
export interface HttpInstrumentation {
  stop(): void;
}

/**
 * Starts tracing outbound HTTP requests with the global tracer provider. Call it after
 * `startTracing` (the spans go to whatever provider is registered when a request starts) and
 * stop it before shutting tracing down.
 */
export function startHttpInstrumentation(): HttpInstrumentation {
  // An instrumentation enables itself when constructed (its default `enabled: true`).
  const instrumentation = new UndiciInstrumentation({
    requireParentforSpans: true,
    // Overrides the instrumentation's own `url.full` and `url.query`, which quote the query string
    // whole: a tool's `?api_key=…` would be in every trace of its tasks.
    startSpanHook: (request) => {
      const url = new URL(request.path, request.origin);
      url.search = redactQuery(url.search);
      return { 'url.full': url.toString(), 'url.query': url.search };
    },
  });
  return { stop: () => instrumentation.disable() };
}
