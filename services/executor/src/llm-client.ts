/**
 * An HTTP client of an OpenAI-compatible chat-completions endpoint (`POST {baseUrl}/chat/completions`),
 * given to step handlers as `ctx.llm`.
 */
import { HttpStatusError, type ChatCompletion, type LlmClient } from '@sluice/sdk';

/** Where the LLM is and how to call it. */
export interface LlmClientOptions {
  /** Base URL up to and including the API version, e.g. `https://api.example.com/v1`. */
  readonly baseUrl: string;
  readonly apiKey: string | undefined;
  readonly model: string;
}

interface CompletionBody {
  model?: unknown;
  choices?: Array<{ message?: { content?: unknown } }>;
  usage?: { prompt_tokens?: unknown; completion_tokens?: unknown };
}

/** Creates the client; `signal` aborts the call (cancel or step timeout). */
export function createLlmClient(options: LlmClientOptions, signal: AbortSignal): LlmClient {
  const url = `${options.baseUrl.replace(/\/+$/, '')}/chat/completions`;
  return {
    async chat(request) {
      const response = await fetch(url, {
        method: 'POST',
        signal,
        headers: {
          'content-type': 'application/json',
          ...(options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {}),
        },
        body: JSON.stringify({ model: request.model ?? options.model, messages: request.messages }),
      });
      if (!response.ok) throw HttpStatusError.fromResponse(response, 'the LLM endpoint');
      const body = (await response.json()) as CompletionBody;
      const content = body.choices?.[0]?.message?.content;
      if (typeof content !== 'string') {
        throw new Error('the LLM endpoint answered without choices[0].message.content');
      }
      const prompt = body.usage?.prompt_tokens;
      const completion = body.usage?.completion_tokens;
      return {
        content,
        model: typeof body.model === 'string' ? body.model : (request.model ?? options.model),
        usage:
          typeof prompt === 'number' && typeof completion === 'number'
            ? { promptTokens: prompt, completionTokens: completion }
            : undefined,
      } satisfies ChatCompletion;
    },
  };
}
