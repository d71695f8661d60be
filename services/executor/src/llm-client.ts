/**
 * An HTTP client of an OpenAI-compatible chat-completions endpoint (`POST {baseUrl}/chat/completions`),
 * given to step handlers as `ctx.llm`. With the executor's {@link LlmGate}, every call waits for
 * a permit and budget first and reports how it ended, so the process finds the provider's limit.
 * A 429 still fails the call with an `HttpStatusError`: retrying is the scheduler's, by class.
 * Each call is a GenAI `chat {model}` span of the step (llm-span.ts), its HTTP request a child.
 */
import {
  HttpStatusError,
  type ChatCompletion,
  type ChatMessage,
  type LlmClient,
} from '@sluice/sdk';
import { readCappedBody } from './capped-body.js';
import { StepAbortError, type AbortReason } from './classify-error.js';
import type { LlmCallResult, LlmGate } from './llm-gate.js';
import { EVENT_LLM_PERMIT, recordChatCompletion, withChatSpan } from './llm-span.js';

/** Where the LLM is and how to call it. */
export interface LlmClientOptions {
  /** Base URL up to and including the API version, e.g. `https://api.example.com/v1`. */
  readonly baseUrl: string;
  readonly apiKey: string | undefined;
  readonly model: string;
}

/**
 * Completion tokens charged up front for a call that declares no `maxTokens`: the provider counts
 * the completion allowance against the token limit before it answers.
 */
export const DEFAULT_COMPLETION_TOKENS = 1_000;

/**
 * Most bytes of an answer read. A completion is text of at most some hundred thousand tokens; an
 * answer larger than this is not one (a misrouted download, an endless stream), and read whole it
 * would exhaust the executor's memory, every step's LLM call at once.
 */
export const MAX_LLM_ANSWER_BYTES = 8 * 1024 * 1024;

/**
 * A chat request. `maxTokens`, a positive whole number (anything else fails the call before it is
 * sent), is sent as `max_tokens` and charged instead of {@link DEFAULT_COMPLETION_TOKENS}.
 */
export interface ChatRequest {
  readonly messages: readonly ChatMessage[];
  readonly model?: string;
  readonly maxTokens?: number;
}

interface CompletionBody {
  id?: unknown;
  model?: unknown;
  choices?: Array<{ message?: { content?: unknown; refusal?: unknown }; finish_reason?: unknown }>;
  usage?: { prompt_tokens?: unknown; completion_tokens?: unknown };
}

/**
 * Chinese, Japanese and Korean characters (CJK symbols, kana, Hangul, ideographs of every plane,
 * full-width forms): tokenizers give such text about a token a character, not one for four.
 */
const CJK_CHARACTER =
  /[\u1100-\u11ff\u3000-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef\u{20000}-\u{3134f}]/gu;

/**
 * Tokens a request may cost: a token a CJK character and about 4 other characters a token for the
 * prompt (at 4 characters a token, CJK text overshot a tokens-per-minute budget up to fourfold),
 * plus the completion.
 */
export function estimateTokens(request: ChatRequest): number {
  let cjk = 0;
  let characters = 0;
  for (const message of request.messages) {
    // Outside the type a handler may send content parts (an array, as OpenAI takes): their JSON.
    const content: unknown = message.content;
    const text = typeof content === 'string' ? content : (JSON.stringify(content) ?? '');
    const rest = text.replace(CJK_CHARACTER, () => {
      cjk += 1;
      return '';
    });
    characters += rest.length;
  }
  const completion =
    request.maxTokens !== undefined && Number.isFinite(request.maxTokens) && request.maxTokens > 0
      ? request.maxTokens
      : DEFAULT_COMPLETION_TOKENS;
  return cjk + Math.ceil(characters / 4) + completion;
}

/**
 * Creates the client; `signal` aborts the call (cancel or step timeout), also while it waits at
 * `gate`. Without a gate, calls go out at once.
 */
export function createLlmClient(
  options: LlmClientOptions,
  signal: AbortSignal,
  gate?: LlmGate,
): LlmClient {
  const url = `${options.baseUrl.replace(/\/+$/, '')}/chat/completions`;
  return {
    chat(request: ChatRequest) {
      const model = request.model ?? options.model;
      return withChatSpan({ model, maxTokens: request.maxTokens, url }, async (span) => {
        // Refused here, before it takes a permit and budget the provider's 400 would waste.
        const problem = maxTokensProblem(request.maxTokens);
        if (problem !== undefined) throw new HttpStatusError(400, problem);
        const permit = await gate?.acquire({ estimatedTokens: estimateTokens(request), signal });
        if (permit !== undefined) span.addEvent(EVENT_LLM_PERMIT);
        const started = performance.now();
        // Unanswered unless an answer arrives; given back however the call ends.
        let result: LlmCallResult = { ok: false, latencyMs: 0 };
        // The provider's answer came whole (a refusal's status, or a 2xx's body).
        let answered = false;
        try {
          const response = await fetch(url, {
            method: 'POST',
            signal,
            headers: {
              'content-type': 'application/json',
              ...(options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {}),
            },
            body: JSON.stringify({
              model,
              messages: request.messages,
              ...(request.maxTokens === undefined ? {} : { max_tokens: request.maxTokens }),
            }),
          });
          // Not `ok` yet: a 2xx whose body is no completion (not JSON, no content, too large)
          // is a failed call for the gate, not a success that would raise its limit.
          result = {
            ok: false,
            status: response.status,
            headers: response.headers,
            latencyMs: performance.now() - started,
          };
          if (!response.ok) {
            answered = true;
            throw await refusalOf(response, options.apiKey);
          }
          const answer = await readCappedBody(response, MAX_LLM_ANSWER_BYTES);
          answered = true;
          if (answer.truncated) {
            throw new Error(
              `the LLM endpoint answered with more than ${MAX_LLM_ANSWER_BYTES} bytes: not a completion`,
            );
          }
          const body = completionBodyOf(answer.text, response, options.apiKey);
          const completion = completionOf(body, model, options.apiKey);
          recordChatCompletion(span, completion, typeof body.id === 'string' ? body.id : undefined);
          result = {
            ...result,
            ok: true,
            latencyMs: performance.now() - started,
            ...(completion.usage === undefined
              ? {}
              : { usageTokens: completion.usage.promptTokens + completion.usage.completionTokens }),
          };
          return completion;
        } catch (error) {
          // Cut by the step's abort before the answer was whole: the gate takes a timeout as a
          // drop (the provider may be overloaded), a cancel as neither success nor failure.
          if (!answered && signal.aborted) {
            result =
              abortReasonOf(signal) === 'timeout'
                ? { ...result, timedOut: true }
                : { ...result, cancelled: true };
          }
          throw error;
        } finally {
          permit?.release(
            result.status === undefined
              ? { ...result, latencyMs: performance.now() - started }
              : result,
          );
        }
      });
    },
  };
}

/**
 * Why `maxTokens` cannot be sent as `max_tokens` (the provider would answer 400), else undefined.
 * The error is an `HttpStatusError` 400 as the provider's would be, so the step fails as a final
 * bad request rather than being retried unchanged.
 */
function maxTokensProblem(maxTokens: unknown): string | undefined {
  if (maxTokens === undefined) return undefined;
  if (typeof maxTokens === 'number' && Number.isSafeInteger(maxTokens) && maxTokens > 0)
    return undefined;
  const shown = typeof maxTokens === 'number' ? String(maxTokens) : `a ${typeof maxTokens}`;
  return `the LLM call was not sent: maxTokens must be a positive whole number, got ${shown}`;
}

/**
 * Why `signal` aborted, by the type of its reason: the step's {@link StepAbortError} says; another
 * `TimeoutError` (`AbortSignal.timeout()`) is a timeout too; anything else is a cancel.
 */
function abortReasonOf(signal: AbortSignal): AbortReason {
  const reason: unknown = signal.reason;
  if (reason instanceof StepAbortError) return reason.abortReason;
  return reason instanceof Error && reason.name === 'TimeoutError' ? 'timeout' : 'cancelled';
}

/** Bytes of a refusal's body read for its reason; the rest is not downloaded. */
const MAX_REFUSAL_BYTES = 4 * 1024;
/** Characters of a refusal's reason kept in the error. */
const MAX_REASON_CHARS = 500;

/**
 * The error of a non-2xx answer, with the provider's reason (`error.message` of an OpenAI-style
 * body, else the start of the text): a 400 for a prompt over the context length or a 404 for an
 * unknown model is final, and without the reason the user cannot tell what to change. A 401/403's
 * reason is not quoted: providers echo (part of) the key there.
 */
async function refusalOf(response: Response, apiKey: string | undefined): Promise<HttpStatusError> {
  const error = HttpStatusError.fromResponse(response, 'the LLM endpoint');
  if (response.status === 401 || response.status === 403) {
    await response.body?.cancel();
    return error;
  }
  const { text, truncated } = await readCappedBody(response, MAX_REFUSAL_BYTES).catch(() => ({
    text: '',
    truncated: false,
  }));
  let reason = truncated ? '' : providerMessage(text);
  reason ||= text.trim();
  reason = quotedReason(reason, apiKey);
  if (reason !== '') error.message = `${error.message}: ${reason}`;
  return error;
}

/** A provider's reason as an error quotes it: the key redacted, on one line, shortened. */
function quotedReason(reason: string, apiKey: string | undefined): string {
  const redacted = apiKey ? reason.replaceAll(apiKey, '[redacted]') : reason;
  return redacted.replace(/\s+/g, ' ').trim().slice(0, MAX_REASON_CHARS);
}

/** `error.message` (OpenAI and most compatible servers) or `message` of a JSON body, else ''. */
function providerMessage(text: string): string {
  try {
    return messageOf(JSON.parse(text));
  } catch {
    return '';
  }
}

/** `error.message`, a string `error` or `message` of a parsed body, else ''. */
function messageOf(parsed: unknown): string {
  if (typeof parsed !== 'object' || parsed === null) return '';
  const body = parsed as { error?: { message?: unknown } | string | null; message?: unknown };
  const message =
    typeof body.error === 'string' ? body.error : (body.error?.message ?? body.message);
  return typeof message === 'string' ? message : '';
}

/** Characters of an answer that is not JSON quoted in the error, so the user sees what came. */
const QUOTED_ANSWER_CHARS = 120;

/**
 * The parsed answer; an answer that is not a JSON object (a proxy's HTML error page with status
 * 200, a cut connection's half) fails with an error that says the endpoint answered so, rather
 * than a bare `SyntaxError` or `TypeError` the user cannot place.
 */
function completionBodyOf(
  text: string,
  response: Response,
  apiKey: string | undefined,
): CompletionBody {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    const type = response.headers.get('content-type') ?? 'no content-type';
    // An endpoint that echoes the request must not put the key into the step's error.
    const quoted = apiKey ? text.replaceAll(apiKey, '[redacted]') : text;
    throw new Error(
      `the LLM endpoint answered HTTP ${response.status} with a body that is not JSON ` +
        `(${type}, ${text.length} characters): ${JSON.stringify(quoted.slice(0, QUOTED_ANSWER_CHARS))}`,
    );
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new Error(
      `the LLM endpoint answered HTTP ${response.status} with JSON that is not an object`,
    );
  }
  return body;
}

function completionOf(
  body: CompletionBody,
  requestedModel: string,
  apiKey: string | undefined,
): ChatCompletion {
  const content = body.choices?.[0]?.message?.content;
  if (typeof content !== 'string') throw missingContentError(body, apiKey);
  const prompt = body.usage?.prompt_tokens;
  const completion = body.usage?.completion_tokens;
  return {
    content,
    model: typeof body.model === 'string' ? body.model : requestedModel,
    usage:
      typeof prompt === 'number' && typeof completion === 'number'
        ? { promptTokens: prompt, completionTokens: completion }
        : undefined,
  };
}

/**
 * The error of an answer without content, with what it holds instead: the model's refusal, why
 * the completion finished (a content filter), or the error of a proxy that answers 200. Without
 * it a refusal read as a broken endpoint.
 */
function missingContentError(body: CompletionBody, apiKey: string | undefined): Error {
  const choice = body.choices?.[0];
  const finish = choice?.finish_reason;
  const refusal = choice?.message?.refusal;
  let message = 'the LLM endpoint answered without choices[0].message.content';
  if (typeof finish === 'string' && finish !== 'stop') {
    message += ` (finish_reason ${quotedReason(finish, apiKey).slice(0, 40)})`;
  }
  const reason = quotedReason(
    typeof refusal === 'string' ? `the model refused: ${refusal}` : messageOf(body),
    apiKey,
  );
  return new Error(reason === '' ? message : `${message}: ${reason}`);
}
