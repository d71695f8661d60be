/**
 * The built-in sample task type `agent-loop`: an LLM decides, turn by turn, which page to read next
 * until it can answer a goal — a loop of two steps that continue with each other.
 *
 * - `decide` (`llm`): shows the LLM the goal, the pages it may read and what it read so far, and
 *   parses its one-line answer: `CALL <url>` continues with `callTool`; a URL outside the allowed
 *   list is refused and noted in the history (the LLM is asked again); anything else — normally
 *   `DONE: <answer>` — completes the task with that answer. After `maxTurns` calls the task
 *   completes with what the LLM said last.
 * - `callTool` (`tool:http`): reads the page and continues with `decide`, its text (cut) added to
 *   the history. 404s are history too; 429 and 5xx are retried.
 *
 * Every step instance is a durable step: an executor crash repeats at most the current call, and
 * the history travels in the steps' inputs, so the loop resumes where it was.
 *
 * Prompting. With a real model, the system prompt below states the protocol and the user message
 * carries the state. The user message begins with the suggested next action (`CALL <the first
 * unread page>`, or `DONE` once every page is read), which a real model may follow or override.
 * The fake LLM of the tests answers "Summary: " and the first 8 words of the last user message, so
 * it always "follows the suggestion": it reads every allowed page in order, then says DONE — a
 * deterministic loop of 2n + 1 steps for n pages.
 */
import { z } from 'zod';
import { complete, defineTask, next } from '@sluice/sdk';
import { cutText, fetchPage, httpUrl } from './web-page.js';

/** Characters of each page kept in the history (and shown to the LLM). */
const EXCERPT_CHARS = 500;
/** Most turns a task may ask for. */
export const MAX_TURNS = 20;

/** What the agent did so far, oldest first. */
const historyEntry = z.discriminatedUnion('kind', [
  z.object({
    kind: z.literal('call'),
    url: z.string(),
    status: z.number().int(),
    title: z.string().nullable(),
    excerpt: z.string(),
  }),
  z.object({ kind: z.literal('refused'), url: z.string(), reason: z.string() }),
]);
type HistoryEntry = z.infer<typeof historyEntry>;
const history = z.array(historyEntry).max(2 * MAX_TURNS);

/** What the LLM asked for. */
export type AgentAction =
  | { readonly type: 'call'; readonly url: string }
  | { readonly type: 'done'; readonly answer: string };

/** The protocol, as the system prompt states it. */
export const AGENT_SYSTEM_PROMPT = [
  'You are a research agent. You answer a goal by reading web pages, one per turn.',
  'Each turn, reply with exactly one line:',
  '  CALL <url>      to read one of the allowed pages (only those), or',
  '  DONE: <answer>  when you can answer the goal from what you have read.',
  'The first line of each message suggests a next action; follow it unless you know better.',
].join('\n');

/**
 * The action in an LLM reply: the first `CALL <url>` anywhere in it (trailing punctuation is not
 * part of the URL), otherwise done — with the text after `DONE:` as the answer when present, else
 * the whole reply.
 */
export function parseAgentReply(reply: string): AgentAction {
  const call = /\bCALL\s+(https?:\/\/\S+)/.exec(reply);
  if (call?.[1]) return { type: 'call', url: call[1].replace(/[.,;:!?)\]'"]+$/, '') };
  const done = /\bDONE:\s*([\s\S]*)$/.exec(reply);
  return { type: 'done', answer: (done?.[1] ?? reply).trim() };
}

/**
 * The user message of a turn: the suggested action first, then the state. With no turn left the
 * suggestion is DONE, and the reply is taken as the answer whatever it says.
 */
export function agentTurnMessage(
  goal: string,
  allowed: readonly string[],
  past: readonly HistoryEntry[],
  turnsLeft: boolean,
): string {
  const read = new Set(past.filter((entry) => entry.kind === 'call').map((entry) => entry.url));
  const unread = allowed.find((url) => !read.has(url));
  const suggestion = !turnsLeft
    ? 'DONE is next: no turn is left, answer with what you have read.'
    : unread
      ? `CALL ${unread} reads the next unread page.`
      : 'DONE is next: every allowed page has been read.';
  const lines = past.map((entry, n) =>
    entry.kind === 'call'
      ? `${n + 1}. read ${entry.url} (HTTP ${entry.status}${entry.title ? `, "${entry.title}"` : ''}): ${entry.excerpt}`
      : `${n + 1}. refused ${entry.url}: ${entry.reason}`,
  );
  return [
    suggestion,
    `Goal: ${goal}`,
    `Allowed pages:\n${allowed.map((url) => `- ${url}`).join('\n')}`,
    lines.length > 0 ? `So far:\n${lines.join('\n')}` : 'Nothing read yet.',
  ].join('\n\n');
}

export const agentLoop = defineTask({
  name: 'agent-loop',
  version: 1,
  description: 'An LLM chooses which allowed page to read next until it can answer a goal.',
  input: z.object({
    goal: z.string().min(1).max(1_000),
    /** The pages the agent may read: it can call nothing else. */
    urls: z.array(httpUrl).min(1).max(10),
    maxTurns: z.number().int().min(1).max(MAX_TURNS).default(5),
  }),
  firstStep: 'decide',
  steps: {
    decide: {
      resource: 'llm',
      timeoutMs: 60_000,
      maxAttempts: 3,
      // The first turn gets the task input, which has no history: it starts empty.
      input: z.object({ history: history.default([]) }),
      // No output schema: a turn's output is its decision, the last turn's the task's result.
    },
    callTool: {
      resource: 'tool:http',
      timeoutMs: 30_000,
      maxAttempts: 3,
      input: z.object({ history, url: httpUrl }),
      output: z.object({ url: z.string(), status: z.number().int() }),
    },
  },
  handlers: {
    async decide(ctx) {
      const { goal, urls, maxTurns } = ctx.taskInput;
      const past = ctx.input.history;
      const calls = past.filter((entry) => entry.kind === 'call').length;
      const turn = past.length + 1;
      // Refused calls count as turns too (up to twice the budget), so a confused model stops.
      const turnsLeft = calls < maxTurns && turn <= 2 * maxTurns;
      void ctx.progress(Math.min(1, calls / maxTurns), `turn ${turn}: ${calls} page(s) read`);
      const answer = await ctx.llm.chat({
        messages: [
          { role: 'system', content: AGENT_SYSTEM_PROMPT },
          { role: 'user', content: agentTurnMessage(goal, urls, past, turnsLeft) },
        ],
      });
      const action = parseAgentReply(answer.content);
      ctx.logger.info({ turn, action: action.type }, 'agent decided');
      const output = { turn, reply: answer.content, action: action.type };
      if (action.type === 'done' || !turnsLeft) {
        return complete({
          goal,
          answer: action.type === 'done' ? action.answer : answer.content,
          stoppedBy: turnsLeft ? 'llm' : 'max_turns',
          turns: turn,
          pagesRead: calls,
          history: past,
        });
      }
      if (!urls.includes(action.url)) {
        const refused = {
          kind: 'refused' as const,
          url: action.url,
          reason: 'not an allowed page',
        };
        return next('decide', { history: [...past, refused] }, output);
      }
      return next('callTool', { history: past, url: action.url }, output);
    },

    async callTool(ctx) {
      const { url, history: past } = ctx.input;
      const page = await fetchPage(url, {
        signal: ctx.signal,
        idempotencyKey: ctx.idempotencyKey,
        acceptStatus: (status) => status >= 400 && status < 500,
      });
      const entry = {
        kind: 'call' as const,
        url,
        status: page.status,
        title: page.title,
        excerpt: cutText(page.text, EXCERPT_CHARS),
      };
      return next('decide', { history: [...past, entry] }, { url, status: page.status });
    },
  },
});
