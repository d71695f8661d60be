/**
 * Telling "Postgres cannot be reached right now" apart from every other failure, so that callers
 * can answer "try again" (gRPC UNAVAILABLE) instead of "internal error", and loops can back off.
 */
import { codeOf, errorChain } from './error-chain.js';

/** Errors of the `postgres` client and of Node's sockets that mean no usable connection. */
const CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'CONNECT_TIMEOUT',
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
]);

/**
 * SQLSTATEs of a server that is going away or not accepting work yet: admin_shutdown (a fast
 * stop), crash_shutdown, cannot_connect_now (starting up or shutting down), too_many_connections.
 * Class 08 (connection exception) is matched as a whole.
 */
const UNAVAILABLE_SQLSTATES = new Set(['57P01', '57P02', '57P03', '53300']);

/** Whether `error` (or a cause) says the database cannot be reached or is not serving now. */
export function isDatabaseUnavailable(error: unknown): boolean {
  return errorChain(error).some((current) => {
    const code = codeOf(current);
    if (code !== undefined) {
      if (CONNECTION_CODES.has(code) || UNAVAILABLE_SQLSTATES.has(code)) return true;
      if (/^08[0-9A-Z]{3}$/.test(code)) return true;
    }
    // Connecting to every address of a host failed (e.g. `localhost` as ::1 and 127.0.0.1).
    return current instanceof AggregateError && current.errors.some(isDatabaseUnavailable);
  });
}
