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
  chat(request: { messages: readonly ChatMessage[]; model?: string }): Promise<ChatCompletion>;
}

/** Structured logging bound to the task and step. */
export interface StepLogger {
  info(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
  error(fields: Record<string, unknown>, message: string): void;
}

/** The context of one step attempt. */
export interface StepContext<TaskInput> {
  readonly taskId: string;
  readonly tenantId: string;
  /** The task's input, validated against the type's schema. */
  readonly taskInput: TaskInput;
  /** This step's own input (the task input for the first step, else what `next` passed). */
  readonly input: Json;
  /** Name and position of this step. */
  readonly step: { readonly name: string; readonly seq: number };
  /** 1 for the first attempt of this step. */
  readonly attempt: number;
  /**
   * Stable across attempts of this step (task id + step sequence): pass it to external systems so a
   * retried call is recognised there.
   */
  readonly idempotencyKey: string;
  /** Fires when the task is cancelled or the step times out; pass it to every I/O call. */
  readonly signal: AbortSignal;
  readonly logger: StepLogger;
  readonly llm: LlmClient;
}
