import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MAX_APPROVAL_PROMPT_CHARS, toStepOutcome, type ChatCompletion } from '@sluice/sdk';
import { researchReport } from './research-report.js';

/** The outline step's outcome when the LLM answers `content`. */
async function outlineOutcome(content: string) {
  const step = researchReport.steps.outline;
  assert.ok(step);
  const answer: ChatCompletion = { content, model: 'fake', usage: undefined };
  const ctx = {
    taskInput: researchReport.input.parse({ topic: 'queues', sources: ['http://127.0.0.1:9/a'] }),
    input: {},
    progress: () => Promise.resolve(),
    span: { setAttribute() {} },
    llm: { chat: () => Promise.resolve(answer) },
  } as unknown as Parameters<typeof step.run>[0];
  return toStepOutcome(await step.run(ctx), { definition: researchReport, step: 'outline' });
}

describe('research-report outline', () => {
  it('asks for approval of a long outline, with all of it in the output', async () => {
    const outline = `1. ${'a long section '.repeat(1_000)}`;
    const outcome = await outlineOutcome(outline);
    assert.equal(outcome.type, 'awaitApproval');
    assert.ok(outcome.prompt.length <= MAX_APPROVAL_PROMPT_CHARS);
    assert.match(outcome.prompt, /^Approve this outline for "queues"\?/);
    assert.match(outcome.prompt, /\[… outline cut\]$/);
    assert.deepEqual(outcome.output, { outline, model: 'fake' });
  });

  it('asks for approval of an outline holding U+0000', async () => {
    const outcome = await outlineOutcome('1. one\u0000two');
    assert.equal(outcome.type, 'awaitApproval');
    assert.match(outcome.prompt, /1\. one\uFFFDtwo$/);
    assert.deepEqual(outcome.output, { outline: '1. one\uFFFDtwo', model: 'fake' });
  });
});
