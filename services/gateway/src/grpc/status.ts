/**
 * Errors a handler throws (or rejects with) to answer a call with a gRPC status.
 *
 * Each helper builds a {@link GrpcError}: a grpc-js `ServiceError` whose `details` is the
 * message the client sees. The handler adapter sends a `GrpcError` as is and turns any other
 * error into `INTERNAL` (logged, message hidden), so only what a helper built reaches a client.
 *
 * @example
 * ```ts
 * if (!isJson(request.input)) throw invalidArgument('input', 'must be valid JSON');
 * if (level === 'reject') throw resourceExhausted('P3 admission is paused', 30_000);
 * ```
 */
import { Metadata, status } from '@grpc/grpc-js';
import type { ServiceError } from '@grpc/grpc-js';
import { STATUS_DETAILS_TRAILER, encodeStatusDetails } from './status-details.js';
import type { StatusDetails } from './status-details.js';

/** A gRPC status to answer a call with; the `ServiceError` grpc-js sends. */
export class GrpcError extends Error implements ServiceError {
  override readonly name = 'GrpcError';
  /** The gRPC status code. */
  readonly code: status;
  /** The message the client sees. */
  readonly details: string;
  /** Trailers sent with the status, e.g. {@link STATUS_DETAILS_TRAILER}. */
  readonly metadata: Metadata;

  constructor(code: status, details: string, richDetails?: StatusDetails) {
    super(details);
    this.code = code;
    this.details = details;
    this.metadata = new Metadata();
    if (richDetails !== undefined) {
      this.metadata.set(STATUS_DETAILS_TRAILER, encodeStatusDetails(code, details, richDetails));
    }
  }
}

/** Whether `err` is a {@link GrpcError} (built by this module), to be sent to the client as is. */
export function isGrpcError(err: unknown): err is GrpcError {
  return err instanceof GrpcError;
}

/**
 * `INVALID_ARGUMENT`: the request field `field` is missing or invalid. The message reads
 * `<field>: <message>`; a `google.rpc.BadRequest` detail names the field for programs.
 */
export function invalidArgument(field: string, message: string): GrpcError {
  return new GrpcError(status.INVALID_ARGUMENT, `${field}: ${message}`, {
    fieldViolations: [{ field, description: message }],
  });
}

/** `NOT_FOUND`: no such resource for the caller (also for another tenant's). */
export function notFound(message: string): GrpcError {
  return new GrpcError(status.NOT_FOUND, message);
}

/** `FAILED_PRECONDITION`: the resource's state does not allow the request; nothing changed. */
export function failedPrecondition(message: string): GrpcError {
  return new GrpcError(status.FAILED_PRECONDITION, message);
}

/**
 * `ABORTED`: the request lost to concurrent changes of the resource and changed nothing; the client
 * may try it again (unlike `FAILED_PRECONDITION`, where the same request keeps failing).
 */
export function aborted(message: string): GrpcError {
  return new GrpcError(status.ABORTED, message);
}

/** `ALREADY_EXISTS`: e.g. an idempotency key reused with a different input. */
export function alreadyExists(message: string): GrpcError {
  return new GrpcError(status.ALREADY_EXISTS, message);
}

/** `UNAUTHENTICATED`: no credentials, or unknown ones. */
export function unauthenticated(message = 'a valid API key is required'): GrpcError {
  return new GrpcError(status.UNAUTHENTICATED, message);
}

/** `UNIMPLEMENTED`: the method is declared but not served (yet). */
export function unimplemented(message: string): GrpcError {
  return new GrpcError(status.UNIMPLEMENTED, message);
}

/**
 * `RESOURCE_EXHAUSTED` with a retry delay: a `google.rpc.Status` holding a
 * `google.rpc.RetryInfo` (`retry_delay` = `retryAfterMs`) in the `grpc-status-details-bin`
 * trailer, the conventional way to tell any gRPC client when to try again.
 *
 * @param retryAfterMs - Milliseconds the client should wait; rounded, negative values become 0.
 */
export function resourceExhausted(message: string, retryAfterMs: number): GrpcError {
  return new GrpcError(status.RESOURCE_EXHAUSTED, message, { retryDelayMs: retryAfterMs });
}

/** `UNAVAILABLE`: transient; the client should retry, e.g. while the server shuts down. */
export function unavailable(message: string): GrpcError {
  return new GrpcError(status.UNAVAILABLE, message);
}

/** `CANCELLED`: the call was cancelled (by the client, or its deadline passed). */
export function cancelled(message: string): GrpcError {
  return new GrpcError(status.CANCELLED, message);
}

/** `INTERNAL`: a bug or an unexpected failure; the message must not leak internals. */
export function internal(message = 'internal error'): GrpcError {
  return new GrpcError(status.INTERNAL, message);
}
