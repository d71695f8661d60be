/**
 * Tells the governor every second how this executor is doing (see `@sluice/bus` executor-report):
 * slots in use, step outcomes (a tool's failures feed its circuit breaker) and the LLM gate's
 * counters (429 pressure and the adaptive limit it found). Core NATS, fire and forget: a lost
 * report only delays what the next one carries, since every counter is cumulative.
 */
import { randomUUID } from 'node:crypto';
import { encodeExecutorReport, type ExecutorReport } from '@sluice/bus';
import type { StepOutcome } from '@sluice/core';
import type { LlmGate } from './llm-gate.js';

/** Error classes that say the dependency itself is failing (what a breaker counts). */
const DEPENDENCY_FAILURES = new Set(['external_5xx', 'tool_timeout']);

export interface GovernorReporterOptions {
  readonly resource: string;
  readonly slots: { readonly capacity: number; readonly inUse: number };
  readonly gate?: LlmGate;
  readonly publish: (data: Uint8Array) => void;
  readonly intervalMs: number;
  readonly onError: (error: unknown) => void;
}

export interface GovernorReporter {
  /** Counts a recorded step outcome. */
  count(outcome: StepOutcome): void;
  /** The report as it would be sent now. */
  report(): ExecutorReport;
  stop(): void;
}

export function startGovernorReporter(options: GovernorReporterOptions): GovernorReporter {
  const executorId = `executor-${options.resource}-${process.pid}-${randomUUID().slice(0, 8)}`;
  let succeeded = 0;
  let failedDependency = 0;

  const report = (): ExecutorReport => {
    const llm = options.gate?.snapshot();
    return {
      executor_id: executorId,
      resource: options.resource,
      slots: options.slots.capacity,
      busy: options.slots.inUse,
      steps_succeeded: succeeded,
      steps_failed_dependency: failedDependency,
      // Executors whose steps never called the LLM leave the LLM signals alone.
      ...(llm && llm.calls + llm.inFlight + llm.waiting > 0
        ? {
            llm: {
              limit: llm.limit,
              in_flight: llm.inFlight,
              waiting: llm.waiting,
              calls: llm.calls,
              rate_limited: llm.rateLimited,
              failed: llm.failed,
              latency_p95_ms: Math.round(llm.latencyP95Ms ?? 0),
            },
          }
        : {}),
      at: new Date().toISOString(),
    };
  };
  const send = () => {
    try {
      options.publish(encodeExecutorReport(report()));
    } catch (error) {
      options.onError(error);
    }
  };
  const timer = setInterval(send, options.intervalMs);
  timer.unref();
  send();

  return {
    count(outcome) {
      if (outcome.type === 'failed') {
        if (DEPENDENCY_FAILURES.has(outcome.error.errorClass)) failedDependency += 1;
      } else if (outcome.type !== 'cancelled') {
        succeeded += 1;
      }
    },
    report,
    stop: () => clearInterval(timer),
  };
}
