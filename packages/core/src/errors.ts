/**
 * Error classes of step failures and the one error base of Sluice.
 *
 * Errors cross processes as plain data ({@link SerializedStepError}); code compares `code`/`errorClass`
 * strings, never `instanceof`, so a rebuilt error behaves like the original.
 */

/** How a step failed; each class has its retry policy (ARCHITECTURE.md, errors and retries). */
export const ErrorClass = {
  LlmRateLimit: 'llm_rate_limit',
  ToolTimeout: 'tool_timeout',
  SchemaValidation: 'schema_validation',
  PermissionDenied: 'permission_denied',
  ApprovalTimeout: 'approval_timeout',
  External5xx: 'external_5xx',
  /** The step was aborted because its task was cancelled. */
  Cancelled: 'cancelled',
  Unknown: 'unknown',
} as const;
export type ErrorClass = (typeof ErrorClass)[keyof typeof ErrorClass];

export const ERROR_CLASSES: readonly ErrorClass[] = Object.values(ErrorClass);

/** Type guard for untrusted strings. */
export function isErrorClass(value: unknown): value is ErrorClass {
  return typeof value === 'string' && (ERROR_CLASSES as readonly string[]).includes(value);
}

/** Whether a class is worth retrying at all (the attempt count decides the rest). */
export function isRetryableClass(errorClass: ErrorClass): boolean {
  switch (errorClass) {
    case 'llm_rate_limit':
    case 'tool_timeout':
    case 'external_5xx':
    case 'unknown':
      return true;
    case 'schema_validation':
    case 'permission_denied':
    case 'approval_timeout':
    case 'cancelled':
      return false;
    default:
      return assertNever(errorClass);
  }
}

/** A step failure as it is stored in Postgres and sent between processes. */
export interface SerializedStepError {
  readonly errorClass: ErrorClass;
  readonly message: string;
  readonly retryable: boolean;
  /** A delay the failing dependency asked for (HTTP `Retry-After`), in milliseconds. */
  readonly retryAfterMs?: number;
}

/** Stable codes of {@link SluiceError}; callers branch on these. */
export const SluiceErrorCode = {
  InvalidArgument: 'invalid_argument',
  NotFound: 'not_found',
  AlreadyExists: 'already_exists',
  FailedPrecondition: 'failed_precondition',
  Unauthenticated: 'unauthenticated',
  PermissionDenied: 'permission_denied',
  ResourceExhausted: 'resource_exhausted',
  Unavailable: 'unavailable',
  Internal: 'internal',
} as const;
export type SluiceErrorCode = (typeof SluiceErrorCode)[keyof typeof SluiceErrorCode];

/** Fields of {@link SluiceError} besides the message. */
export interface SluiceErrorOptions {
  /** The request field at fault, for `invalid_argument` (e.g. `input.url`). */
  readonly field?: string;
  /** How long the caller should wait before trying again, for `resource_exhausted`. */
  readonly retryAfterMs?: number;
  readonly cause?: unknown;
}

/**
 * The one error base of Sluice. `code` says what kind of failure it is; the gateway maps it to a
 * gRPC status with an exhaustive switch.
 */
export class SluiceError extends Error {
  override readonly name = 'SluiceError';
  readonly code: SluiceErrorCode;
  readonly field: string | undefined;
  readonly retryAfterMs: number | undefined;

  constructor(code: SluiceErrorCode, message: string, options: SluiceErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.field = options.field;
    this.retryAfterMs = options.retryAfterMs;
  }
}

/**
 * True for a {@link SluiceError} (checked by shape, so it also holds across module copies), and
 * with `code` only for one of that code.
 */
export function isSluiceError(error: unknown, code?: SluiceErrorCode): error is SluiceError {
  if (!(error instanceof Error) || error.name !== 'SluiceError') return false;
  const actual = (error as { code?: unknown }).code;
  return typeof actual === 'string' && (code === undefined || actual === code);
}

/** For exhaustive switches: fails to compile when a case is missing. */
export function assertNever(value: never): never {
  throw new Error(`unexpected value: ${String(value)}`);
}
