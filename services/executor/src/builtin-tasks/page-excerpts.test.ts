import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { toStepOutcome, type StepContext, type TaskDefinition } from '@sluice/sdk';
import { agentLoop } from './agent-loop.js';
import { researchBrief } from './research-brief.js';
import { researchReport } from './research-report.js';
import { cutText } from './web-page.js';

/**
 * Pages whose text a built-in step keeps an excerpt of: what the step returns must be storable
 * (no U+0000, no half of a surrogate pair), whatever the page holds.
 */
const PAGES: Readonly<Record<string, string>> = {
  // An emoji (two UTF-16 units) across every excerpt's cut: 280, 500 and 2,000 characters.
  '/emoji': `x${'😀'.repeat(1_200)}`,
  '/nul': 'before\u0000after',
  '/entity': '<html><title>T &#xD800;</title><body>a lone &#xDC00; half</body></html>',
};

describe('built-in steps keep storable excerpts of the pages they read', () => {
  const server = createServer((req, res) => {
    const body = PAGES[req.url ?? ''] ?? '';
    const type = body.startsWith('<html>') ? 'text/html' : 'text/plain; charset=utf-8';
    res.writeHead(200, { 'content-type': type }).end(body);
  });
  let base = '';
  before(async () => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  /** Runs `step` of `definition` as the executor would, up to the outcome it would record. */
  async function outcomeOf(
    definition: TaskDefinition,
    step: string,
    taskInput: unknown,
    input: unknown,
  ) {
    const declared = definition.steps[step];
    assert.ok(declared);
    const ctx = {
      taskId: '00000000-0000-4000-8000-000000000001',
      tenantId: 'tenant',
      taskInput: definition.input.parse(taskInput),
      input: declared.input ? declared.input.parse(input) : input,
      outputs: {},
      outputOf: () => assert.fail('no earlier output'),
      step: { name: step, seq: 2 },
      attempt: 1,
      idempotencyKey: 'task:2',
      signal: AbortSignal.timeout(10_000),
      logger: { debug() {}, info() {}, warn() {}, error() {} },
      llm: { chat: () => assert.fail('no LLM call expected') },
      span: {},
      approval: undefined,
      degraded: false,
      progress: () => Promise.resolve(),
    } as unknown as StepContext;
    const result = await declared.run(ctx);
    return toStepOutcome(result, { definition, step, inBranch: step === 'fetchPage' });
  }

  for (const path of Object.keys(PAGES)) {
    it(`agent-loop callTool of ${path}`, async () => {
      const url = `${base}${path}`;
      const outcome = await outcomeOf(
        agentLoop,
        'callTool',
        { goal: 'g', urls: [url] },
        {
          history: [],
          url,
        },
      );
      assert.equal(outcome.type, 'next');
    });

    it(`research-report fetchPage of ${path}`, async () => {
      const url = `${base}${path}`;
      const outcome = await outcomeOf(
        researchReport,
        'fetchPage',
        { topic: 't', sources: [url] },
        { url, index: 0 },
      );
      assert.equal(outcome.type, 'complete');
    });

    it(`research-brief fetchSource of ${path}`, async () => {
      const url = `${base}${path}`;
      const outcome = await outcomeOf(
        researchBrief,
        'fetchSource',
        { topic: 't', sourceUrl: url },
        { url, outline: 'o' },
      );
      assert.equal(outcome.type, 'complete');
    });
  }

  it('cutText never keeps half of a surrogate pair', () => {
    assert.equal(cutText('ab😀', 3), 'ab');
    assert.equal(cutText('ab😀', 4), 'ab😀');
    assert.equal(cutText('abc', 10), 'abc');
  });
});
