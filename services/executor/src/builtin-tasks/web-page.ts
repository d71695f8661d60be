/**
 * Reading a web page for the sample task types: a GET with the step's idempotency key, a capped
 * body (a huge page must not exhaust the executor), and the readable text of HTML.
 */
import { z } from 'zod';
import { storableText } from '@sluice/core';
import { HttpStatusError } from '@sluice/sdk';
import { readCappedBody } from '../capped-body.js';
import { redactUrl } from '../url-redaction.js';

/** Most bytes of a response body read; the rest is not downloaded. */
export const MAX_BODY_BYTES = 1024 * 1024;

/**
 * An absolute http(s) URL. The pattern is what reaches the registered JSON Schema (the gateway
 * validates with it); the protocol check is zod's own, for the executor.
 */
export const httpUrl = z
  .url({ protocol: /^https?$/ })
  .regex(/^https?:\/\/[^\s/?#]+[^\s]*$/i)
  .max(2_000);

/** A fetched page. */
export interface FetchedPage {
  readonly url: string;
  readonly status: number;
  readonly contentType: string;
  /** The HTML `<title>`, or null (storable, as {@link FetchedPage.text}). */
  readonly title: string | null;
  /**
   * The readable text: HTML without tags, scripts and styles; other types as they are. U+0000 and
   * lone surrogates (which Postgres cannot store, so a step output holding one is refused) are
   * shown as U+FFFD; cut it with {@link cutText}.
   */
  readonly text: string;
  /** The body as received (up to {@link MAX_BODY_BYTES}). */
  readonly body: string;
  /** True when the body was longer than {@link MAX_BODY_BYTES} and cut. */
  readonly truncated: boolean;
}

/** Options of {@link fetchPage}. */
export interface FetchPageOptions {
  readonly signal: AbortSignal;
  /** Sent as `Idempotency-Key`, so the server can recognise a retried request. */
  readonly idempotencyKey: string;
  /**
   * Answers with these statuses are returned rather than thrown (e.g. a 404 the caller wants to
   * record). 429 and 5xx are always thrown, to be retried.
   */
  readonly acceptStatus?: (status: number) => boolean;
}

/**
 * GETs `url`.
 *
 * @throws HttpStatusError for a status the caller does not accept (classified: 429 and 5xx are
 *   retried, 401/403 are permission errors).
 */
export async function fetchPage(url: string, options: FetchPageOptions): Promise<FetchedPage> {
  const response = await fetch(url, {
    signal: options.signal,
    headers: { 'idempotency-key': options.idempotencyKey, accept: 'text/html, text/*, */*' },
  });
  const retryable = response.status === 429 || response.status >= 500;
  if (!response.ok && (retryable || !(options.acceptStatus?.(response.status) ?? false))) {
    await response.body?.cancel();
    // The error is stored with the step, its events and any dead letter: no key of the query.
    throw HttpStatusError.fromResponse(response, redactUrl(url));
  }
  const { text: body, truncated } = await readCappedBody(response, MAX_BODY_BYTES);
  const contentType = response.headers.get('content-type') ?? '';
  const html = /html/i.test(contentType) || /^\s*</.test(body);
  const readable = html ? htmlToText(body) : { title: null, text: body.trim() };
  return {
    url,
    status: response.status,
    contentType,
    title: readable.title === null ? null : storableText(readable.title),
    text: storableText(readable.text),
    body,
    truncated,
  };
}

/**
 * The first `maxChars` UTF-16 units of `text`, one fewer when the cut would split a surrogate pair
 * (an emoji): half a character is a lone surrogate, which Postgres cannot store.
 */
export function cutText(text: string, maxChars: number): string {
  const cut = text.slice(0, maxChars);
  const last = cut.charCodeAt(cut.length - 1);
  return cut.length < text.length && last >= 0xd800 && last <= 0xdbff ? cut.slice(0, -1) : cut;
}

const ENTITIES: Readonly<Record<string, string>> = {
  amp: '&',
  lt: '<',
  gt: '>',
  quot: '"',
  apos: "'",
  nbsp: ' ',
};

/** The title and readable text of an HTML document (good enough for prompts, not a renderer). */
export function htmlToText(html: string): { title: string | null; text: string } {
  const title = /<title[^>]*>([\s\S]*?)<\/title>/i.exec(html)?.[1];
  const text = html
    .replace(/<(script|style|head|title|noscript)[^>]*>[\s\S]*?<\/\1>/gi, ' ')
    .replace(/<(br|\/p|\/div|\/h[1-6]|\/li|\/tr)[^>]*>/gi, '\n')
    .replace(/<[^>]+>/g, ' ');
  return {
    title: title === undefined ? null : collapse(decodeEntities(title)),
    text: decodeEntities(text)
      .split('\n')
      .map(collapse)
      .filter((line) => line.length > 0)
      .join('\n'),
  };
}

function decodeEntities(text: string): string {
  return text.replace(/&(#x[0-9a-f]+|#\d+|[a-z]+);/gi, (entity, code: string) => {
    if (code.startsWith('#x') || code.startsWith('#X')) {
      return safeCodePoint(Number.parseInt(code.slice(2), 16), entity);
    }
    if (code.startsWith('#')) return safeCodePoint(Number.parseInt(code.slice(1), 10), entity);
    return ENTITIES[code.toLowerCase()] ?? entity;
  });
}

function safeCodePoint(code: number, fallback: string): string {
  return Number.isInteger(code) && code > 0 && code <= 0x10ffff
    ? String.fromCodePoint(code)
    : fallback;
}

function collapse(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}
