/**
 * The GenAI span of one LLM call, following the OpenTelemetry semantic conventions for generative
 * AI client spans (`gen_ai.*`, still "development" status, so the names are spelled out here rather
 * than taken from `@opentelemetry/semantic-conventions/incubating`): `chat {model}`, kind CLIENT,
 * a child of the active span (the step's). The call's HTTP request is its child span (see
 * http-instrumentation.ts), so a trace shows both what was asked of which model and how the
 * request went.
 *
 * Both `gen_ai.system` (older conventions) and `gen_ai.provider.name` (newer) are set: Jaeger
 * and other backends still read either.
 */
import { SpanKind, SpanStatusCode, trace, type Attributes, type Span } from '@opentelemetry/api';
import { HttpStatusError, type ChatCompletion } from '@sluice/sdk';

export const ATTR_GEN_AI_OPERATION_NAME = 'gen_ai.operation.name';
export const ATTR_GEN_AI_SYSTEM = 'gen_ai.system';
export const ATTR_GEN_AI_PROVIDER_NAME = 'gen_ai.provider.name';
export const ATTR_GEN_AI_REQUEST_MODEL = 'gen_ai.request.model';
export const ATTR_GEN_AI_REQUEST_MAX_TOKENS = 'gen_ai.request.max_tokens';
export const ATTR_GEN_AI_RESPONSE_MODEL = 'gen_ai.response.model';
export const ATTR_GEN_AI_RESPONSE_ID = 'gen_ai.response.id';
export const ATTR_GEN_AI_USAGE_INPUT_TOKENS = 'gen_ai.usage.input_tokens';
export const ATTR_GEN_AI_USAGE_OUTPUT_TOKENS = 'gen_ai.usage.output_tokens';
/** Semantic conventions' `error.type`: the HTTP status as text, or the error's name. */
export const ATTR_ERROR_TYPE = 'error.type';
/** Whether the provider answered 429 (rate limited); set only then. */
export const ATTR_LLM_RATE_LIMITED = 'sluice.llm.rate_limited';
/** The `Retry-After` of a 429, in milliseconds, when the provider sent one. */
export const ATTR_LLM_RETRY_AFTER_MS = 'sluice.llm.retry_after_ms';
/** The event of a call that waited at the executor's LLM gate and got its permit. */
export const EVENT_LLM_PERMIT = 'sluice.llm.permit';

/** Sluice speaks the OpenAI chat-completions API (`gen_ai.provider.name` well-known value). */
const PROVIDER = 'openai';

/** What the span says about the request, known before it goes out. */
export interface ChatSpanRequest {
  /** The model asked for. */
  readonly model: string;
  /** `max_tokens` when the caller set one. */
  readonly maxTokens?: number;
  /** The endpoint, for `server.address` and `server.port`. */
  readonly url: string;
}

/**
 * Runs `fn` (the call) inside the `chat {model}` span; a thrown error is recorded (ERROR status,
 * `error.type`, and for a 429 {@link ATTR_LLM_RATE_LIMITED}) and rethrown. The span ends in every
 * case.
 */
export async function withChatSpan<T>(
  request: ChatSpanRequest,
  fn: (span: Span) => Promise<T>,
): Promise<T> {
  const tracer = trace.getTracer('@sluice/executor');
  const endpoint = new URL(request.url);
  const attributes: Attributes = {
    [ATTR_GEN_AI_OPERATION_NAME]: 'chat',
    [ATTR_GEN_AI_SYSTEM]: PROVIDER,
    [ATTR_GEN_AI_PROVIDER_NAME]: PROVIDER,
    [ATTR_GEN_AI_REQUEST_MODEL]: request.model,
    'server.address': endpoint.hostname,
    'server.port': Number(endpoint.port || (endpoint.protocol === 'https:' ? 443 : 80)),
    ...(request.maxTokens === undefined
      ? {}
      : { [ATTR_GEN_AI_REQUEST_MAX_TOKENS]: request.maxTokens }),
  };
  return tracer.startActiveSpan(
    `chat ${request.model}`,
    { kind: SpanKind.CLIENT, attributes },
    async (span) => {
      try {
        return await fn(span);
      } catch (error) {
        recordChatError(span, error);
        throw error;
      } finally {
        span.end();
      }
    },
  );
}

/** Adds what the answer says: the model that answered, its id, and the tokens when reported. */
export function recordChatCompletion(
  span: Span,
  completion: ChatCompletion,
  responseId: string | undefined,
): void {
  span.setAttribute(ATTR_GEN_AI_RESPONSE_MODEL, completion.model);
  if (responseId !== undefined) span.setAttribute(ATTR_GEN_AI_RESPONSE_ID, responseId);
  if (completion.usage !== undefined) {
    span.setAttribute(ATTR_GEN_AI_USAGE_INPUT_TOKENS, completion.usage.promptTokens);
    span.setAttribute(ATTR_GEN_AI_USAGE_OUTPUT_TOKENS, completion.usage.completionTokens);
  }
}

function recordChatError(span: Span, error: unknown): void {
  const message = error instanceof Error ? error.message : String(error);
  span.recordException(error instanceof Error ? error : message);
  span.setStatus({ code: SpanStatusCode.ERROR, message });
  if (error instanceof HttpStatusError) {
    span.setAttribute(ATTR_ERROR_TYPE, String(error.status));
    if (error.status === 429) {
      span.setAttribute(ATTR_LLM_RATE_LIMITED, true);
      if (error.retryAfterMs !== undefined)
        span.setAttribute(ATTR_LLM_RETRY_AFTER_MS, error.retryAfterMs);
    }
  } else {
    span.setAttribute(ATTR_ERROR_TYPE, error instanceof Error ? error.name : 'unknown');
  }
}
