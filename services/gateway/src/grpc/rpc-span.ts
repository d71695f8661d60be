/**
 * The server span of one gRPC call, after the OpenTelemetry RPC semantic conventions: named
 * `<service>/<method>` (e.g. `sluice.v1.TaskService/CreateTask`), kind SERVER, with `rpc.system`,
 * `rpc.service`, `rpc.method` and, once answered, `rpc.grpc.status_code`.
 *
 * A caller that sends a W3C `traceparent` (and `tracestate`) in the call's metadata gets the span as
 * a child of its own, so a task created by a traced program is part of that program's trace; any
 * other call starts a trace. grpc-js has no OpenTelemetry instrumentation of its own that works with
 * ESM, which is why this is done by hand.
 */
import type { Metadata } from '@grpc/grpc-js';
import { status } from '@grpc/grpc-js';
import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  propagation,
  trace,
  type Context,
  type Span,
  type TextMapGetter,
} from '@opentelemetry/api';
import {
  ATTR_RPC_GRPC_STATUS_CODE,
  ATTR_RPC_METHOD,
  ATTR_RPC_SERVICE,
  ATTR_RPC_SYSTEM,
} from '@sluice/telemetry';

/** Reads trace-context keys from gRPC metadata (keys are lower case; only string values count). */
const metadataGetter: TextMapGetter<Metadata> = {
  get(carrier, key) {
    const value = carrier.get(key)[0];
    return typeof value === 'string' && value !== '' ? value : undefined;
  },
  keys(carrier) {
    return Object.keys(carrier.getMap());
  },
};

/**
 * Status codes that make a server span an error: the server's own failures. A caller's mistake
 * (`INVALID_ARGUMENT`, `NOT_FOUND`, …) is a correct answer, as the conventions say.
 */
const SERVER_ERRORS: ReadonlySet<status> = new Set([
  status.UNKNOWN,
  status.DEADLINE_EXCEEDED,
  status.UNIMPLEMENTED,
  status.INTERNAL,
  status.UNAVAILABLE,
  status.DATA_LOSS,
]);

/** A started server span and the context to run the handler in (the span active in it). */
export interface RpcServerSpan {
  readonly span: Span;
  readonly context: Context;
  /** Records the answer and ends the span. */
  end(code: status, message?: string): void;
}

/**
 * Starts the server span of a call to `path` (`/package.Service/Method`), continuing the trace in
 * `metadata` when there is one. A no-op span in a process that has not started tracing.
 */
export function startRpcServerSpan(path: string, metadata: Metadata): RpcServerSpan {
  const name = path.startsWith('/') ? path.slice(1) : path;
  const slash = name.lastIndexOf('/');
  const service = name.slice(0, slash);
  const method = name.slice(slash + 1);
  // From the root context: nothing active in the server's own code is the call's parent.
  const parent = propagation.extract(ROOT_CONTEXT, metadata, metadataGetter);
  const span = trace.getTracer('@sluice/gateway').startSpan(
    name,
    {
      kind: SpanKind.SERVER,
      attributes: {
        [ATTR_RPC_SYSTEM]: 'grpc',
        [ATTR_RPC_SERVICE]: service,
        [ATTR_RPC_METHOD]: method,
      },
    },
    parent,
  );
  let ended = false;
  return {
    span,
    context: trace.setSpan(parent, span),
    end(code, message) {
      if (ended) return;
      ended = true;
      span.setAttribute(ATTR_RPC_GRPC_STATUS_CODE, code);
      if (SERVER_ERRORS.has(code)) {
        span.setStatus({
          code: SpanStatusCode.ERROR,
          ...(message === undefined ? {} : { message }),
        });
      }
      span.end();
    },
  };
}
