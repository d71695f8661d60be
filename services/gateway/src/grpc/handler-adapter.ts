/**
 * Adapts promise-returning handlers to grpc-js's callback handlers, so that handler code is plain
 * `async` code and every outcome reaches the client exactly once:
 * - a resolved value (unary) or a resolved promise (streaming) answers `OK`;
 * - a rejection with a {@link GrpcError} answers its status, trailers included;
 * - a rejection because Postgres cannot be reached answers `UNAVAILABLE` (retry later);
 * - any other rejection is logged and answers `INTERNAL` with a generic message;
 * - a unary handler still running at its deadline answers `UNAVAILABLE` then.
 *
 * Each unary call is an RPC server span (rpc-span.ts), active while its handler runs, so the spans
 * a handler opens (the task's create span) are its children — and, when the caller sent a
 * `traceparent`, part of the caller's trace.
 */
import type { EventEmitter } from 'node:events';
import { status } from '@grpc/grpc-js';
import type {
  ServerUnaryCall,
  ServerWritableStream,
  handleServerStreamingCall,
  handleUnaryCall,
} from '@grpc/grpc-js';
import { isDatabaseUnavailable } from '@sluice/db';
import type { Logger } from '@sluice/telemetry';
import { context as otelContext } from '@opentelemetry/api';
import { startRpcServerSpan } from './rpc-span.js';
import { cancelled, internal, isGrpcError, unavailable } from './status.js';
import type { GrpcError } from './status.js';

/** What a handler gets besides the call. */
export interface CallContext {
  /**
   * Aborted when the call ends early: the client cancelled it or its deadline passed, and, for
   * streaming calls only, when the server begins to shut down. `signal.reason` is then a
   * {@link GrpcError} (`CANCELLED`, or `UNAVAILABLE` for a shutdown) that the handler may throw
   * to end the call. Unary calls are left to finish during a shutdown.
   */
  readonly signal: AbortSignal;
}

/** A unary method: resolves with the response or rejects with a {@link GrpcError}. */
export type UnaryMethod<Req, Res> = (
  call: ServerUnaryCall<Req, Res>,
  context: CallContext,
) => Promise<Res>;

/**
 * A server-streaming method: writes responses with `call.write` (honouring its return value
 * and `'drain'` for flow control), then resolves to end the stream with `OK` or rejects with a
 * {@link GrpcError}. It must not call `call.end()` itself.
 */
export type ServerStreamingMethod<Req, Res> = (
  call: ServerWritableStream<Req, Res>,
  context: CallContext,
) => Promise<void>;

/** One finished call, for metrics. */
export interface FinishedCall {
  /** Full method path, e.g. `/sluice.v1.TaskService/CreateTask`. */
  method: string;
  /** The status code the call ended with. */
  code: status;
  /** Time from the handler's start to the call's end, in milliseconds. */
  durationMs: number;
  /** Whether the method streams responses. */
  streaming: boolean;
}

/**
 * Longest a unary handler may run before the call is answered `UNAVAILABLE`: well under a client's
 * usual deadline (the SDK's is 30 s), so a stuck dependency (a frozen Postgres, a pool waiting for
 * connections) gets an answer to retry on, never a hang. Handlers are short database work; one
 * that is still running finishes in the background (a create commits or not as a whole, and a
 * retry with the same idempotency key finds it).
 */
export const DEFAULT_UNARY_DEADLINE_MS = 20_000;

/** What the adapters need from the server. */
export interface AdapterEnvironment {
  /** Receives unexpected handler errors. */
  logger: Logger;
  /** Aborted when the server starts to shut down. */
  shutdownSignal: AbortSignal;
  /** Called once per finished call, e.g. to count calls by method and code. */
  onCallFinished?: ((call: FinishedCall) => void) | undefined;
  /** See {@link DEFAULT_UNARY_DEADLINE_MS} (the default). */
  unaryDeadlineMs?: number | undefined;
}

/** Wraps a {@link UnaryMethod} as a grpc-js unary handler for the method at `path`. */
export function adaptUnary<Req, Res>(
  path: string,
  method: UnaryMethod<Req, Res>,
  env: AdapterEnvironment,
): handleUnaryCall<Req, Res> {
  return (call, callback) => {
    const started = performance.now();
    const rpcSpan = startRpcServerSpan(path, call.metadata);
    const cancellation = watchCancellation(call, undefined);
    const deadlineMs = env.unaryDeadlineMs ?? DEFAULT_UNARY_DEADLINE_MS;
    const run = async (): Promise<{ response: Res } | { error: GrpcError }> => {
      let timer: NodeJS.Timeout | undefined;
      const handled = otelContext
        .with(rpcSpan.context, () => method(call, { signal: cancellation.signal }))
        .then(
          (response) => ({ response }),
          (err: unknown) => ({ error: toGrpcError(err, path, env.logger) }),
        );
      const overdue = new Promise<{ error: GrpcError }>((resolve) => {
        timer = setTimeout(() => {
          env.logger.warn({ method: path, deadline_ms: deadlineMs }, 'gRPC handler overdue');
          resolve({ error: unavailable(`no answer within ${deadlineMs} ms; retry later`) });
        }, deadlineMs);
      });
      try {
        return await Promise.race([handled, overdue]);
      } finally {
        clearTimeout(timer);
        cancellation.dispose();
      }
    };
    void run()
      .then((outcome) => {
        const code = call.cancelled
          ? status.CANCELLED
          : 'error' in outcome
            ? outcome.error.code
            : status.OK;
        if ('error' in outcome) callback(outcome.error);
        else callback(null, outcome.response);
        rpcSpan.end(code, 'error' in outcome ? outcome.error.details : undefined);
        report(env, {
          method: path,
          code,
          durationMs: performance.now() - started,
          streaming: false,
        });
      })
      .catch((err: unknown) => {
        rpcSpan.end(status.INTERNAL, 'the answer failed');
        env.logger.error({ err, method: path }, 'gRPC answer failed');
      });
  };
}

/** Wraps a {@link ServerStreamingMethod} as a grpc-js server-streaming handler. */
export function adaptServerStreaming<Req, Res>(
  path: string,
  method: ServerStreamingMethod<Req, Res>,
  env: AdapterEnvironment,
): handleServerStreamingCall<Req, Res> {
  return (call) => {
    const started = performance.now();
    const cancellation = watchCancellation(call, env.shutdownSignal);
    const run = async (): Promise<GrpcError | undefined> => {
      try {
        await method(call, { signal: cancellation.signal });
        return undefined;
      } catch (err) {
        return toGrpcError(err, path, env.logger);
      } finally {
        cancellation.dispose();
      }
    };
    void run()
      .then((error) => {
        const code = call.cancelled ? status.CANCELLED : (error?.code ?? status.OK);
        if (!call.cancelled) {
          // grpc-js sends the status of an 'error' event once the queued writes are flushed.
          if (error === undefined) call.end();
          else call.emit('error', error);
        }
        report(env, {
          method: path,
          code,
          durationMs: performance.now() - started,
          streaming: true,
        });
      })
      .catch((err: unknown) => env.logger.error({ err, method: path }, 'gRPC answer failed'));
  };
}

/** The error to send for a handler's rejection; anything unexpected is logged and hidden. */
function toGrpcError(err: unknown, path: string, logger: Logger): GrpcError {
  if (isGrpcError(err)) return err;
  // Postgres down or restarting is the caller's "try again later", not a server bug.
  if (isDatabaseUnavailable(err)) {
    logger.warn({ err, method: path }, 'gRPC handler: database unavailable');
    return unavailable('the database is unavailable; retry later');
  }
  logger.error({ err, method: path }, 'gRPC handler failed');
  return internal();
}

/** An AbortSignal for one call: aborted when the client goes away, or `shutdown` aborts. */
function watchCancellation(
  call: EventEmitter & { readonly cancelled: boolean },
  shutdown: AbortSignal | undefined,
): { signal: AbortSignal; dispose(): void } {
  const controller = new AbortController();
  const onCancelled = (): void => controller.abort(cancelled('the call was cancelled'));
  const onShutdown = (): void => controller.abort(unavailable('the server is shutting down'));
  // grpc-js reports a passed deadline as a cancellation too.
  if (call.cancelled) onCancelled();
  else call.once('cancelled', onCancelled);
  if (shutdown?.aborted === true) onShutdown();
  else shutdown?.addEventListener('abort', onShutdown, { once: true });
  return {
    signal: controller.signal,
    dispose() {
      call.removeListener('cancelled', onCancelled);
      shutdown?.removeEventListener('abort', onShutdown);
    },
  };
}

function report(env: AdapterEnvironment, finished: FinishedCall): void {
  try {
    env.onCallFinished?.(finished);
  } catch (err) {
    env.logger.error({ err, method: finished.method }, 'onCallFinished failed');
  }
}
