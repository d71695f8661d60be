/**
 * A fake OpenAI-compatible LLM endpoint on loopback, for tests and the demo.
 *
 * Product code talks to it over real HTTP exactly as it would to a hosted model: same route
 * (`POST /v1/chat/completions`), same bearer authentication, same response and error shapes. The
 * answer is deterministic (see {@link fakeCompletionContent}) so tests can assert on it, and
 * failures (429 with `retry-after`, 500, …) can be injected to exercise retries. A hidden limit
 * (concurrency, requests per second) answers 429s as a provider whose limit nobody told us would.
 *
 * Node built-ins only, so the demo script can import it too.
 *
 * @example
 * ```ts
 * await using llm = await startFakeLlmServer({ apiKey: 'sk-test', failures: [{ status: 429, retryAfterSeconds: 1 }] });
 * // configure the executor with llm.baseUrl and 'sk-test'; the first call gets a 429.
 * ```
 */
import { createServer } from 'node:http';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { setTimeout as delay } from 'node:timers/promises';

/** A failure to answer instead of a completion. */
export interface FakeLlmFailure {
  /** The HTTP status, 400–599 (e.g. 429, 500, 503). */
  status: number;
  /** Sent as the `retry-after` header when given, in whole seconds. */
  retryAfterSeconds?: number;
}

/** Options of {@link startFakeLlmServer}. */
export interface FakeLlmServerOptions {
  /** When set, requests must carry `Authorization: Bearer <apiKey>` or get a 401. */
  apiKey?: string;
  /** Delay before answering each accepted call (failure or completion), in ms; default 0. */
  latencyMs?: number;
  /** Answered, in order, to the next well-formed authenticated calls instead of a completion. */
  failures?: readonly FakeLlmFailure[];
  /** The loopback port; default 0 (a free one). */
  port?: number;
  /**
   * A rate limit the client is not told about (no `x-ratelimit-*` headers), as a provider's real
   * limit is unknown: a call over it is answered at once with a 429 and `retry-after`.
   */
  hiddenLimit?: FakeLlmHiddenLimit;
}

/** See {@link FakeLlmServerOptions.hiddenLimit}; each part is off when absent. */
export interface FakeLlmHiddenLimit {
  /** Calls answered at once: one arriving while this many are in flight gets a 429. */
  maxConcurrent?: number;
  /** Calls admitted in any sliding second: one more within it gets a 429. */
  requestsPerSecond?: number;
  /** The 429's `retry-after`, in whole seconds; default 1 (ignored when `retryAfterMs` is set). */
  retryAfterSeconds?: number;
  /**
   * Sent as `retry-after-ms` (which OpenAI's SDK reads first) with `retry-after` rounded up to
   * whole seconds: for tests that cannot wait a second per 429.
   */
  retryAfterMs?: number;
}

/** Counters of a fake LLM server since it started (every accepted call counts). */
export interface FakeLlmStats {
  /** Accepted (authenticated, well-formed) calls; as `requests.length`. */
  calls: number;
  /** Calls answered 429: by the hidden limit or an injected failure. */
  rateLimited: number;
  /** Calls answered with a completion. */
  succeeded: number;
  /**
   * The most accepted calls in flight at once, each counted on arrival before the hidden limit
   * decides: above `maxConcurrent` exactly when clients pushed past it.
   */
  maxInFlight: number;
}

/** The roles the chat-completions API accepts. */
export const CHAT_ROLES = ['system', 'developer', 'user', 'assistant', 'tool'] as const;

/** One of {@link CHAT_ROLES}. */
export type ChatRole = (typeof CHAT_ROLES)[number];

/** One chat message as received (only the fields the fake looks at are typed). */
export interface ChatMessage {
  role: ChatRole;
  /** Text, an array of content parts (`{ type: 'text', text }`, …), or null (assistant tool calls). */
  content: string | ReadonlyArray<{ type: string; text?: string }> | null;
}

/** A call the server accepted (authenticated, well-formed), whether answered or failed. */
export interface RecordedChatRequest {
  model: string;
  messages: ChatMessage[];
  headers: IncomingHttpHeaders;
}

/** A running fake LLM server. */
export interface FakeLlmServer {
  /** The API base URL to configure clients with, e.g. `http://127.0.0.1:41234/v1`. */
  readonly baseUrl: string;
  /**
   * Every accepted (authenticated, well-formed) call in arrival order, recorded before its answer
   * is sent: those answered with an injected failure or over the hidden limit included, 400s and
   * 401s not.
   */
  readonly requests: RecordedChatRequest[];
  /** Queues more failures behind those still pending. */
  failNext(...failures: FakeLlmFailure[]): void;
  /** A copy of the counters now. */
  stats(): FakeLlmStats;
  /** Stops the server, cutting open connections and pending delayed answers. Idempotent. */
  stop(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/** How many words of the last user message the fake's answer repeats. */
export const SUMMARY_WORDS = 8;

/** Largest accepted request body, in bytes; larger ones get a 413. */
export const MAX_BODY_BYTES = 1024 * 1024;

/**
 * The content the fake answers for `messages`: `"Summary: "` and the first {@link SUMMARY_WORDS}
 * words of the last user message, or `"Summary: (nothing to summarize)"` without one.
 */
export function fakeCompletionContent(messages: readonly ChatMessage[]): string {
  const lastUser = messages.findLast((message) => message.role === 'user');
  const words = lastUser === undefined ? [] : wordsOf(lastUser.content);
  return words.length === 0
    ? 'Summary: (nothing to summarize)'
    : `Summary: ${words.slice(0, SUMMARY_WORDS).join(' ')}`;
}

/**
 * Starts the fake on `127.0.0.1`.
 *
 * @throws RangeError for a failure status outside 400–599, a negative latency or a hidden limit
 *   that is not whole numbers (counts ≥ 1, `retryAfterSeconds` ≥ 0).
 */
export async function startFakeLlmServer(
  options: FakeLlmServerOptions = {},
): Promise<FakeLlmServer> {
  const latencyMs = options.latencyMs ?? 0;
  if (!Number.isFinite(latencyMs) || latencyMs < 0) {
    throw new RangeError(`latencyMs must be ≥ 0, got ${latencyMs}`);
  }
  const pendingFailures: FakeLlmFailure[] = [];
  const failNext = (...failures: FakeLlmFailure[]): void => {
    for (const failure of failures) checkFailure(failure);
    pendingFailures.push(...failures);
  };
  failNext(...(options.failures ?? []));
  const hidden = options.hiddenLimit ?? {};
  checkHiddenLimit(hidden);
  const stats: FakeLlmStats = { calls: 0, rateLimited: 0, succeeded: 0, maxInFlight: 0 };
  let inFlight = 0;
  /** Arrival times of the calls admitted under the hidden limit within the last second. */
  const admittedAt: number[] = [];
  /** Whether the hidden limit turns away a call arriving now (`inFlight` already counts it). */
  const overHiddenLimit = (): boolean => {
    const now = performance.now();
    while (admittedAt.length > 0 && (admittedAt[0] ?? now) <= now - 1_000) admittedAt.shift();
    if (hidden.maxConcurrent !== undefined && inFlight > hidden.maxConcurrent) return true;
    if (hidden.requestsPerSecond !== undefined && admittedAt.length >= hidden.requestsPerSecond)
      return true;
    if (hidden.requestsPerSecond !== undefined) admittedAt.push(now);
    return false;
  };

  const requests: RecordedChatRequest[] = [];
  const stopped = new AbortController();
  let completions = 0;

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const path = new URL(req.url ?? '/', 'http://localhost').pathname;
    if (path !== '/v1/chat/completions') {
      return sendError(res, 404, `Invalid URL (${req.method} ${path})`, 'invalid_request_error');
    }
    if (req.method !== 'POST') {
      res.setHeader('allow', 'POST');
      return sendError(res, 405, `Method ${req.method} not allowed`, 'invalid_request_error');
    }
    const raw = await readBody(req);
    if (raw === undefined) {
      return sendError(res, 413, 'Request body too large', 'invalid_request_error');
    }

    if (options.apiKey !== undefined) {
      const authorization = req.headers.authorization;
      if (authorization === undefined) {
        return sendError(
          res,
          401,
          "You didn't provide an API key. Send it as 'Authorization: Bearer <key>'.",
          'invalid_request_error',
        );
      }
      if (authorization !== `Bearer ${options.apiKey}`) {
        return sendError(res, 401, 'Incorrect API key provided.', 'invalid_request_error', {
          code: 'invalid_api_key',
        });
      }
    }

    const parsed = parseChatRequest(raw);
    if ('problem' in parsed) {
      return sendError(res, 400, parsed.problem, 'invalid_request_error', { param: parsed.param });
    }
    requests.push({ model: parsed.model, messages: parsed.messages, headers: req.headers });
    stats.calls += 1;
    inFlight += 1;
    stats.maxInFlight = Math.max(stats.maxInFlight, inFlight);
    try {
      if (overHiddenLimit()) {
        stats.rateLimited += 1;
        return sendHiddenLimit(res, hidden);
      }
      if (latencyMs > 0) await delay(latencyMs, undefined, { signal: stopped.signal });
    } finally {
      // No later than the answer is written: a client that has it may call again at once.
      inFlight -= 1;
    }

    const failure = pendingFailures.shift();
    if (failure !== undefined) {
      if (failure.status === 429) stats.rateLimited += 1;
      return sendFailure(res, failure);
    }

    completions += 1;
    stats.succeeded += 1;
    const content = fakeCompletionContent(parsed.messages);
    const promptTokens = parsed.messages.reduce((n, m) => n + wordsOf(m.content).length, 0);
    const completionTokens = wordsOf(content).length;
    sendJson(res, 200, {
      id: `chatcmpl-fake-${completions}`,
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model: parsed.model,
      choices: [
        {
          index: 0,
          message: { role: 'assistant', content, refusal: null },
          logprobs: null,
          finish_reason: 'stop',
        },
      ],
      usage: {
        prompt_tokens: promptTokens,
        completion_tokens: completionTokens,
        total_tokens: promptTokens + completionTokens,
      },
    });
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      // Aborted by stop(), or the client went away: the connection is gone, nothing to answer.
      if (stopped.signal.aborted || res.destroyed) return;
      if (!res.headersSent) {
        sendError(res, 500, `fake LLM server failed: ${String(error)}`, 'server_error');
      } else res.destroy();
    });
  });

  const port = await listen(server, options.port ?? 0);
  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= new Promise<void>((resolve, reject) => {
      stopped.abort();
      server.close((error) => (error ? reject(error) : resolve()));
      server.closeAllConnections();
    });
    return stopping;
  };

  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    failNext,
    stats: () => ({ ...stats }),
    stop,
    [Symbol.asyncDispose]: stop,
  };
}

function checkFailure(failure: FakeLlmFailure): void {
  if (!Number.isInteger(failure.status) || failure.status < 400 || failure.status > 599) {
    throw new RangeError(`an injected failure needs a status in 400–599, got ${failure.status}`);
  }
  const seconds = failure.retryAfterSeconds;
  if (seconds !== undefined && (!Number.isInteger(seconds) || seconds < 0)) {
    throw new RangeError(`retryAfterSeconds must be a whole number ≥ 0, got ${seconds}`);
  }
}

function checkHiddenLimit(limit: FakeLlmHiddenLimit): void {
  for (const [name, value, least] of [
    ['maxConcurrent', limit.maxConcurrent, 1],
    ['requestsPerSecond', limit.requestsPerSecond, 1],
    ['retryAfterSeconds', limit.retryAfterSeconds, 0],
    ['retryAfterMs', limit.retryAfterMs, 0],
  ] as const) {
    if (value !== undefined && !(Number.isInteger(value) && value >= least)) {
      throw new RangeError(`hiddenLimit.${name} must be a whole number ≥ ${least}, got ${value}`);
    }
  }
}

type ParsedChatRequest =
  { model: string; messages: ChatMessage[] } | { problem: string; param: string | null };

/** Validates the parts of a chat-completions body the fake relies on, as the real API would. */
function parseChatRequest(raw: string): ParsedChatRequest {
  let body: unknown;
  try {
    body = JSON.parse(raw);
  } catch {
    return { problem: 'We could not parse the JSON body of your request.', param: null };
  }
  if (!isRecord(body)) return { problem: 'The request body must be a JSON object.', param: null };
  if (typeof body.model !== 'string' || body.model.length === 0) {
    return { problem: "'model' is required and must be a non-empty string.", param: 'model' };
  }
  if (body.stream === true) {
    return { problem: 'The fake LLM server does not support streaming.', param: 'stream' };
  }
  if (!Array.isArray(body.messages) || body.messages.length === 0) {
    return { problem: "'messages' must be a non-empty array.", param: 'messages' };
  }
  const messages: ChatMessage[] = [];
  for (const [index, message] of (body.messages as unknown[]).entries()) {
    const param = `messages[${index}]`;
    if (!isRecord(message)) return { problem: `${param} must be an object.`, param };
    const role = message.role;
    if (!isChatRole(role)) {
      return {
        problem: `${param}.role must be one of ${CHAT_ROLES.join(', ')}.`,
        param: `${param}.role`,
      };
    }
    const content = message.content;
    if (!isContent(content)) {
      return {
        problem: `${param}.content must be a string, an array of content parts, or null.`,
        param: `${param}.content`,
      };
    }
    messages.push({ role, content });
  }
  return { model: body.model, messages };
}

function isChatRole(value: unknown): value is ChatRole {
  return CHAT_ROLES.some((role) => role === value);
}

function isContent(value: unknown): value is ChatMessage['content'] {
  if (value === null || typeof value === 'string') return true;
  return (
    Array.isArray(value) &&
    value.every(
      (part) =>
        isRecord(part) &&
        typeof part.type === 'string' &&
        (part.type !== 'text' || typeof part.text === 'string'),
    )
  );
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function wordsOf(content: ChatMessage['content']): string[] {
  const text =
    typeof content === 'string'
      ? content
      : (content ?? []).map((part) => (part.type === 'text' ? (part.text ?? '') : '')).join(' ');
  return text.split(/\s+/).filter((word) => word.length > 0);
}

/** The request body as text, or `undefined` once it exceeds {@link MAX_BODY_BYTES}. */
async function readBody(req: IncomingMessage): Promise<string | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  let tooLarge = false;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    // Keep draining so the client can read our 413 instead of a reset connection.
    if (size > MAX_BODY_BYTES) tooLarge = true;
    else chunks.push(chunk);
  }
  return tooLarge ? undefined : Buffer.concat(chunks).toString('utf8');
}

function sendFailure(res: ServerResponse, failure: FakeLlmFailure): void {
  if (failure.retryAfterSeconds !== undefined) {
    res.setHeader('retry-after', String(failure.retryAfterSeconds));
  }
  if (failure.status === 429) {
    return sendError(res, 429, 'Rate limit reached for requests (injected).', 'requests', {
      code: 'rate_limit_exceeded',
    });
  }
  if (failure.status >= 500) {
    return sendError(
      res,
      failure.status,
      'The server had an error while processing your request (injected).',
      'server_error',
    );
  }
  sendError(res, failure.status, 'Request failed (injected).', 'invalid_request_error');
}

function sendHiddenLimit(res: ServerResponse, limit: FakeLlmHiddenLimit): void {
  if (limit.retryAfterMs === undefined) {
    res.setHeader('retry-after', String(limit.retryAfterSeconds ?? 1));
  } else {
    res.setHeader('retry-after-ms', String(limit.retryAfterMs));
    res.setHeader('retry-after', String(Math.ceil(limit.retryAfterMs / 1_000)));
  }
  sendError(res, 429, 'Rate limit reached for requests.', 'requests', {
    code: 'rate_limit_exceeded',
  });
}

/** Answers in the OpenAI error shape: `{ error: { message, type, param, code } }`. */
function sendError(
  res: ServerResponse,
  status: number,
  message: string,
  type: string,
  extra: { param?: string | null; code?: string | null } = {},
): void {
  sendJson(res, status, {
    error: { message, type, param: extra.param ?? null, code: extra.code ?? null },
  });
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}

async function listen(server: ReturnType<typeof createServer>, port: number): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  if (address === null || typeof address === 'string') {
    throw new Error(`fake LLM server is not on a TCP port: ${String(address)}`);
  }
  return address.port;
}
