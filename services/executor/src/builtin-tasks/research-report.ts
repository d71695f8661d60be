/**
 * The built-in sample task type `research-report`: a research report with a person in the loop.
 *
 * 1. `outline` (`llm`): the LLM outlines a report on the topic; the task then waits for a person to
 *    approve the outline (`awaitApproval`; paused or cancelled when nobody decides in time).
 * 2. `fetchPage` (`tool:http`), fanned out: once approved, every source URL is fetched in its own
 *    branch, in parallel; each branch completes with what it read.
 * 3. `summarize` (`llm`): the join — the LLM summarises the pages along the approved outline; the
 *    approver's comment is passed on as guidance. The task completes with the report.
 */
import { z } from 'zod';
import { storableText } from '@sluice/core';
import {
  MAX_APPROVAL_PROMPT_CHARS,
  awaitApproval,
  branch,
  complete,
  defineTask,
  fanOut,
  joinInput,
} from '@sluice/sdk';
import { cutText, fetchPage, httpUrl } from './web-page.js';

/** Default time a person has to approve the outline (24 h). */
export const DEFAULT_APPROVAL_TIMEOUT_MS = 24 * 60 * 60 * 1_000;
/** Ends an outline cut to fit the approval prompt. */
const CUT_MARK = '\n[… outline cut]';
/** Characters of each page that reach the summary prompt (and the branch output). */
const PAGE_EXCERPT_CHARS = 2_000;

/** What a fetch branch completes with. */
const pageSummary = z.object({
  url: z.string(),
  status: z.number(),
  title: z.string().nullable(),
  excerpt: z.string(),
  chars: z.number(),
});

export const researchReport = defineTask({
  name: 'research-report',
  version: 1,
  description:
    'Outline a report with an LLM, wait for a person to approve it, fetch every source in parallel, then summarise.',
  input: z.object({
    topic: z.string().min(1).max(500),
    sources: z.array(httpUrl).min(1).max(20),
    /** How long the outline may wait for approval (1 s to 7 days; default 24 h). */
    approvalTimeoutMs: z
      .number()
      .int()
      .min(1_000)
      .max(7 * 24 * 60 * 60 * 1_000)
      .default(DEFAULT_APPROVAL_TIMEOUT_MS),
    /** What happens when nobody decides in time (default: the task is paused). */
    onApprovalTimeout: z.enum(['pause', 'cancel']).default('pause'),
  }),
  firstStep: 'outline',
  steps: {
    outline: {
      resource: 'llm',
      timeoutMs: 60_000,
      maxAttempts: 3,
      output: z.object({ outline: z.string(), model: z.string() }),
    },
    fetchPage: {
      resource: 'tool:http',
      timeoutMs: 30_000,
      maxAttempts: 4,
      input: z.object({ url: httpUrl, index: z.number().int().min(0) }),
      output: pageSummary,
    },
    summarize: {
      resource: 'llm',
      timeoutMs: 120_000,
      maxAttempts: 3,
      input: joinInput(pageSummary),
    },
  },
  handlers: {
    async outline(ctx) {
      const { topic, sources } = ctx.taskInput;
      void ctx.progress(0, 'asking the LLM for an outline');
      const answer = await ctx.llm.chat({
        messages: [
          {
            role: 'system',
            content: 'You outline research reports: 3 to 6 numbered sections, one line each.',
          },
          { role: 'user', content: `Outline a research report about: ${topic}` },
        ],
      });
      ctx.span.setAttribute('sluice.sample.sources', sources.length);
      // What the model wrote, as Postgres can store it (a U+0000 would fail the step for good).
      const outline = storableText(answer.content);
      const question = [
        `Approve this outline for "${topic}"?`,
        `Once approved, ${sources.length} source page(s) are fetched and summarised.`,
        '',
        '',
      ].join('\n');
      // A prompt may be at most MAX_APPROVAL_PROMPT_CHARS long: a longer answer is shown cut (the
      // output keeps all of it), rather than failing the task.
      const room = MAX_APPROVAL_PROMPT_CHARS - question.length;
      const shown =
        outline.length <= room ? outline : `${cutText(outline, room - CUT_MARK.length)}${CUT_MARK}`;
      return awaitApproval({
        prompt: question + shown,
        timeoutMs: ctx.taskInput.approvalTimeoutMs,
        onTimeout: ctx.taskInput.onApprovalTimeout,
        then: fanOut(
          sources.map((url, index) => branch('fetchPage', { url, index })),
          'summarize',
        ),
        output: { outline, model: answer.model },
      });
    },

    async fetchPage(ctx) {
      const { url } = ctx.input;
      const page = await fetchPage(url, {
        signal: ctx.signal,
        idempotencyKey: ctx.idempotencyKey,
        // A missing page is part of the report, not a reason to fail it.
        acceptStatus: (status) => status === 404 || status === 410,
      });
      ctx.logger.info({ url, status: page.status, chars: page.text.length }, 'source fetched');
      return complete({
        url,
        status: page.status,
        title: page.title,
        excerpt: cutText(page.text, PAGE_EXCERPT_CHARS),
        chars: page.text.length,
      });
    },

    async summarize(ctx) {
      const { topic } = ctx.taskInput;
      const outline = ctx.outputOf('outline').outline;
      const pages = ctx.input.outputs;
      const readable = pages.filter((page) => page.status < 400);
      void ctx.progress(0.1, `summarising ${readable.length} of ${pages.length} sources`);
      const guidance = ctx.approval?.comment ? `Reviewer's guidance: ${ctx.approval.comment}` : '';
      const answer = await ctx.llm.chat({
        messages: [
          {
            role: 'system',
            content:
              'You write concise research reports that follow the given outline and cite sources as [n].',
          },
          {
            role: 'user',
            content: [
              `Write the report on ${topic}.`,
              `Outline:\n${outline}`,
              guidance,
              ...readable.map(
                (page, n) => `[${n + 1}] ${page.title ?? page.url} (${page.url})\n${page.excerpt}`,
              ),
            ]
              .filter((part) => part !== '')
              .join('\n\n'),
          },
        ],
      });
      return complete({
        topic,
        outline,
        reviewerComment: ctx.approval?.comment ?? null,
        report: answer.content,
        model: answer.model,
        sources: pages.map(({ url, status, title, chars }) => ({ url, status, title, chars })),
      });
    },
  },
});
