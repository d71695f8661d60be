/**
 * What each executor tells the governor every second on `executorReports` (core NATS): its slots
 * and how many are busy (the `worker_busy_ratio` signal), the outcomes of its steps (a tool's error
 * rate, which feeds that tool's circuit breaker) and its LLM gate's counters (429 pressure, the
 * adaptive limit it found).
 *
 * Counters are cumulative since the executor started, so the governor takes differences between
 * two reports of the same executor: a lost report only delays what the next one carries, and a
 * restarted executor is a new `executor_id`.
 */
import { resourceProblem, SluiceError } from '@sluice/core';
import {
  encodeJsonPayload,
  jsonObject,
  parseJsonPayload,
  type JsonPayloadKind,
} from './json-payload.js';

/** The LLM gate's view (see the executor's `llm-gate.ts`); counters are cumulative. */
export interface LlmGateReport {
  /** The adaptive concurrency limit now. */
  readonly limit: number;
  readonly in_flight: number;
  readonly waiting: number;
  readonly calls: number;
  readonly rate_limited: number;
  readonly failed: number;
  /** p95 latency of recent calls, in ms (0 when none). */
  readonly latency_p95_ms: number;
}

/** One executor's report. */
export interface ExecutorReport {
  /** Unique per executor process incarnation. */
  readonly executor_id: string;
  readonly resource: string;
  readonly slots: number;
  readonly busy: number;
  /** Steps that succeeded (or asked for a next step) since the executor started. */
  readonly steps_succeeded: number;
  /**
   * Steps that failed because the dependency did (5xx, timeouts, connection errors) since the
   * executor started — what a circuit breaker counts. Failures that say nothing about the
   * dependency's health (bad input, permission, cancellation) are left out.
   */
  readonly steps_failed_dependency: number;
  /** Present on executors whose steps called an LLM. */
  readonly llm?: LlmGateReport;
  /** When the report was made, ISO 8601. */
  readonly at: string;
}

/** Largest report accepted. */
export const MAX_REPORT_BYTES = 4 * 1024;

const REPORT_PAYLOAD: JsonPayloadKind = {
  what: 'executor report',
  field: 'report',
  maxBytes: MAX_REPORT_BYTES,
  invalid,
};

/**
 * Encodes a report after checking it.
 *
 * @throws SluiceError `invalid_argument` naming the field when the report is malformed.
 */
export function encodeExecutorReport(report: ExecutorReport): Uint8Array {
  return encodeJsonPayload(parseExecutorReport(report));
}

/**
 * Decodes and validates a report; unknown fields are dropped.
 *
 * @throws SluiceError `invalid_argument` naming the field when the bytes are not a valid report.
 */
export function decodeExecutorReport(data: Uint8Array): ExecutorReport {
  return parseExecutorReport(parseJsonPayload(data, REPORT_PAYLOAD));
}

/** Validates an already parsed value as a report. */
export function parseExecutorReport(value: unknown): ExecutorReport {
  const v = jsonObject(value, 'report', REPORT_PAYLOAD);
  const id = v.executor_id;
  if (typeof id !== 'string' || id.length === 0 || id.length > 200) {
    throw invalid('executor_id', 'must be a string of 1 to 200 characters');
  }
  if (typeof v.resource !== 'string' || resourceProblem(v.resource)) {
    throw invalid('resource', 'must be a valid resource name');
  }
  if (typeof v.at !== 'string' || Number.isNaN(Date.parse(v.at))) {
    throw invalid('at', 'must be an ISO 8601 time');
  }
  const slots = count(v.slots, 'slots');
  const report: ExecutorReport = {
    executor_id: id,
    resource: v.resource,
    slots,
    busy: count(v.busy, 'busy'),
    steps_succeeded: count(v.steps_succeeded, 'steps_succeeded'),
    steps_failed_dependency: count(v.steps_failed_dependency, 'steps_failed_dependency'),
    at: v.at,
  };
  if (v.llm === undefined) return report;
  const llm = jsonObject(v.llm, 'llm', REPORT_PAYLOAD);
  return {
    ...report,
    llm: {
      limit: count(llm.limit, 'llm.limit'),
      in_flight: count(llm.in_flight, 'llm.in_flight'),
      waiting: count(llm.waiting, 'llm.waiting'),
      calls: count(llm.calls, 'llm.calls'),
      rate_limited: count(llm.rate_limited, 'llm.rate_limited'),
      failed: count(llm.failed, 'llm.failed'),
      latency_p95_ms: count(llm.latency_p95_ms, 'llm.latency_p95_ms'),
    },
  };
}

function count(value: unknown, field: string): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw invalid(field, 'must be a whole number ≥ 0');
  }
  return value;
}

function invalid(field: string, problem: string): SluiceError {
  return new SluiceError('invalid_argument', `executor report ${field} ${problem}`, { field });
}
