/**
 * What a step handler gets from the executor running it.
 */
import type { Json } from '@sluice/core';

/** One message of a chat completion. */
export interface ChatMessage {
  readonly role: 'system' | 'user' | 'assistant';
  readonly content: string;
}

/** The answer of an LLM call. */
export interface ChatCompletion {
  readonly content: string;
  readonly model: string;
  readonly usage: { readonly promptTokens: number; readonly completionTokens: number } | undefined;
}

/** The LLM endpoint configured on the executor (an OpenAI-compatible chat-completions API). */
export interface LlmClient {
  /**
   * One chat completion. `maxTokens` caps the answer (sent as `max_tokens`) and is what the
   * executor's LLM gate charges against the tokens-per-minute budget before the call.
   */
  chat(request: {
    messages: readonly ChatMessage[];
    model?: string;
    maxTokens?: number;
  }): Promise<ChatCompletion>;
}

/** Structured logging bound to the task and step (and the step's trace, when tracing is on). */
export interface StepLogger {
  debug(fields: Record<string, unknown>, message: string): void;
  info(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
  error(fields: Record<string, unknown>, message: string): void;
}

/** A value an attribute of a span may have (as OpenTelemetry allows). */
export type SpanAttributeValue = string | number | boolean | string[] | number[] | boolean[];

/**
 * The step's OpenTelemetry span (`sluice.step <name>`, a child of the task's trace): the subset of
 * `@opentelemetry/api`'s `Span` a handler needs, so this package does not depend on OpenTelemetry.
 * The span is also the active span while the handler runs, so spans the handler (or a library it
 * calls) starts with `@opentelemetry/api` become its children.
 */
export interface StepSpan {
  /** The trace and span ids (`traceId` is the task's trace id, as `GetTask` reports it). */
  spanContext(): { readonly traceId: string; readonly spanId: string };
  setAttribute(key: string, value: SpanAttributeValue): unknown;
  addEvent(name: string, attributes?: Record<string, SpanAttributeValue>): unknown;
  recordException(exception: Error | string): void;
  /** False when tracing is not started in the executor (the span is then only a carrier of ids). */
  isRecording(): boolean;
}

/** The decision that let the task continue after an `awaitApproval`. */
export interface ApprovalDecision {
  readonly approved: true;
  /** What the approver wrote (`''` when nothing). */
  readonly comment: string;
  /** When the approval was recorded (ISO 8601). */
  readonly decidedAt: string;
}

/** The outputs of earlier steps of a task type whose steps declare no output schema. */
export type UntypedOutputs = { readonly [step: string]: Json | undefined };

/**
 * The context of one step attempt.
 *
 * @typeParam TaskInput - the task's input: the output type of the task's zod schema.
 * @typeParam Input - this step's input: the output type of its `input` schema, else {@link Json}.
 * @typeParam Outputs - the outputs of the task's steps by name, each possibly absent (see
 *   {@link StepContext.outputs}).
 */
export interface StepContext<
  TaskInput = unknown,
  Input = Json,
  Outputs extends object = UntypedOutputs,
> {
  readonly taskId: string;
  readonly tenantId: string;
  /** The task's input, parsed with the type's schema. */
  readonly taskInput: TaskInput;
  /**
   * This step's own input, parsed with its `input` schema when it declares one: what `next` or a
   * fan-out branch passed, `{ outputs: [...] }` for the join of a fan-out, and the task input for
   * the first step.
   */
  readonly input: Input;
  /**
   * The outputs of the steps that succeeded before this one, by step name. A step that ran several
   * times (a loop) shows its latest output. Which steps are "before" is decided at run time — a
   * step may be reached along different paths — so every entry may be `undefined`; use
   * {@link StepContext.outputOf} when the step must have run.
   *
   * Fan-out: a branch sees the steps before the fan-out and the earlier steps of its own branch,
   * never a sibling branch; steps after the fan-out see the branches only through the join's input.
   */
  readonly outputs: Outputs;
  /**
   * The output of an earlier step that must have succeeded.
   *
   * @throws Error (a programming error, the step fails) when that step has no recorded output.
   */
  outputOf<Step extends keyof Outputs & string>(step: Step): Exclude<Outputs[Step], undefined>;
  /** Name and position of this step within the task (the sequence numbers every step instance). */
  readonly step: { readonly name: string; readonly seq: number };
  /** 1 for the first attempt of this step, 2 for its first retry … */
  readonly attempt: number;
  /**
   * `<task id>:<step seq>`: the same on every attempt of this step instance. Pass it to external
   * systems (an `Idempotency-Key` header, a unique column) so that a retried call is recognised.
   */
  readonly idempotencyKey: string;
  /** Fires when the task is cancelled or the step times out; pass it to every I/O call. */
  readonly signal: AbortSignal;
  readonly logger: StepLogger;
  readonly llm: LlmClient;
  /** The span of this step attempt. */
  readonly span: StepSpan;
  /** Set when the task went through an approval: the latest one (steps run only once approved). */
  readonly approval: ApprovalDecision | undefined;
  /**
   * True while the governor asks this task's priority to degrade (ARCHITECTURE.md, backpressure):
   * the system is under pressure, and a handler that has a cheaper path (a smaller model, fewer
   * sources, a shorter answer) should take it. Read when the attempt starts; a handler without a
   * cheaper path ignores it.
   */
  readonly degraded: boolean;
  /**
   * Reports how far the step is, for `GetTask`, `WatchTask` and event subscribers: `fraction` from
   * 0 to 1 and a short message. Writes are throttled to a few per second per step; the last value
   * reported is always written before the step's result is recorded. Resolves once the value (or a
   * later one) is stored; a failed write is logged, never thrown, so the call need not be awaited.
   *
   * @throws RangeError at once when `fraction` is not a number from 0 to 1.
   */
  progress(fraction: number, message?: string): Promise<void>;
}
