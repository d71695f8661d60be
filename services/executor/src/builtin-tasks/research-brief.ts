/**
 * The built-in sample task type `research-brief`: an LLM drafts an outline for a topic (`llm`),
 * then the source page is fetched over HTTP (`tool:http`) and the brief completes with both.
 * Both steps make real HTTP calls: to the configured OpenAI-compatible endpoint, and to the URL.
 */
import { z } from 'zod';
import { storableText } from '@sluice/core';
import { complete, defineTask, next } from '@sluice/sdk';
import { cutText, fetchPage } from './web-page.js';

/** Largest page body the fetch step keeps (the rest is cut), so outputs stay small. */
const MAX_PAGE_CHARS = 64 * 1024;

export const researchBrief = defineTask({
  name: 'research-brief',
  version: 1,
  description: 'Outline a topic with an LLM, then fetch the source page it should cite.',
  input: z.object({
    topic: z.string().min(1).max(500),
    // The pattern is what reaches the registered JSON Schema (the gateway validates with it); the
    // protocol check is zod's own, for the executor.
    sourceUrl: z.url({ protocol: /^https?$/ }).regex(/^https?:\/\/[^\s/?#]+[^\s]*$/i),
  }),
  firstStep: 'outline',
  steps: {
    outline: {
      resource: 'llm',
      timeoutMs: 60_000,
      output: z.object({ outline: z.string(), model: z.string() }),
    },
    fetchSource: {
      resource: 'tool:http',
      timeoutMs: 30_000,
      input: z.object({ url: z.string(), outline: z.string() }),
    },
  },
  handlers: {
    async outline(ctx) {
      const answer = await ctx.llm.chat({
        messages: [
          { role: 'system', content: 'You write short research outlines.' },
          { role: 'user', content: `Outline a brief about: ${ctx.taskInput.topic}` },
        ],
      });
      return next(
        'fetchSource',
        { url: ctx.taskInput.sourceUrl, outline: answer.content },
        { outline: answer.content, model: answer.model },
      );
    },
    async fetchSource(ctx) {
      const { url, outline } = ctx.input;
      // Read capped (fetchPage): an endless or huge page must neither hold the step until its
      // timeout nor exhaust the executor's memory. A failed fetch's answer is closed unread.
      const page = await fetchPage(url, { signal: ctx.signal, idempotencyKey: ctx.idempotencyKey });
      return complete({
        topic: ctx.taskInput.topic,
        outline,
        source: {
          url,
          status: page.status,
          title: page.title,
          // Storable: a page's U+0000 or half an emoji in the output would fail the step for good.
          excerpt: cutText(storableText(page.body), 280),
          chars: Math.min(page.body.length, MAX_PAGE_CHARS),
        },
      });
    },
  },
});
