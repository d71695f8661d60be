/**
 * Configuration of the gateway, from the environment.
 */
import { z } from 'zod';
import {
  ADMISSION_ENV,
  COMMON_ENV,
  enumVar,
  intVar,
  loadEnvConfig,
  type EnvConfig,
} from '@sluice/runtime';
import { faultInjectionVar } from './fault-injection.js';

/** Largest accepted task input, in bytes of JSON text. */
export const DEFAULT_MAX_INPUT_BYTES = 1024 * 1024;

export const GATEWAY_ENV = {
  ...COMMON_ENV,
  /** Admission's limits, for the urgent claim: give the gateway the scheduler's values. */
  ...ADMISSION_ENV,
  /**
   * The urgent claim: `on`, a create of P0 work claims its first step in the create's own
   * transaction (within admission's limits) and publishes it before answering, so the step needs
   * no scheduler pass; `off`, every step waits for the scheduler's admission (issue 7, session 17:
   * P0's wait shorter with it, idle and under a backlog; docs/benchmarks).
   */
  SLUICE_URGENT_CLAIM: enumVar(['on', 'off'], 'on'),
  SLUICE_GRPC_HOST: z.string().min(1).default('127.0.0.1'),
  /** Port of the gRPC API; 0 picks a free one. */
  SLUICE_GRPC_PORT: intVar(50_051, 0, 65_535),
  SLUICE_MAX_INPUT_BYTES: intVar(DEFAULT_MAX_INPUT_BYTES, 2, 16 * 1024 * 1024),
  /**
   * How often a watch re-reads Postgres even without an event notice (notices are core NATS
   * messages and may be lost; this bounds the delay a lost one causes).
   */
  SLUICE_WATCH_RECHECK_MS: intVar(2_000, 50, 60_000),
  /**
   * Longest a unary call may wait for its handler before it is answered `UNAVAILABLE` (a stuck
   * dependency, e.g. a frozen Postgres): below the SDK's 30 s deadline, so a client gets an answer
   * it can retry on, and far above what a healthy but busy gateway needs.
   */
  SLUICE_UNARY_TIMEOUT_MS: intVar(20_000, 1_000, 300_000),
  /** Test only: a fault the gateway injects into itself (fault-injection.ts); unset in production. */
  SLUICE_FAULT_INJECTION: faultInjectionVar(),
};

export type GatewayConfig = EnvConfig<typeof GATEWAY_ENV>;

export function loadGatewayConfig(
  env: Record<string, string | undefined> = process.env,
): GatewayConfig {
  return loadEnvConfig(GATEWAY_ENV, env);
}
