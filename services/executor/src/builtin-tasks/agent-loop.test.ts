import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { agentTurnMessage, parseAgentReply } from './agent-loop.js';

/** What the fake LLM of the tests answers: "Summary: " and the first 8 words of the message. */
function fakeReply(userMessage: string): string {
  return `Summary: ${userMessage.split(/\s+/).filter(Boolean).slice(0, 8).join(' ')}`;
}

const urls = ['http://127.0.0.1:9/a', 'http://127.0.0.1:9/b'];
const read = (url: string) => ({
  kind: 'call' as const,
  url,
  status: 200,
  title: null,
  excerpt: 'x',
});

describe('agent protocol', () => {
  it('parses CALL anywhere in a reply, without trailing punctuation', () => {
    assert.deepEqual(parseAgentReply('I will read it.\nCALL https://example.com/x.'), {
      type: 'call',
      url: 'https://example.com/x',
    });
    assert.deepEqual(parseAgentReply('CALL http://h/p?q=1)'), {
      type: 'call',
      url: 'http://h/p?q=1',
    });
  });

  it('takes anything else as done, with the answer after DONE: when given', () => {
    assert.deepEqual(parseAgentReply('DONE: queues absorb bursts.'), {
      type: 'done',
      answer: 'queues absorb bursts.',
    });
    assert.deepEqual(parseAgentReply('I cannot tell.'), { type: 'done', answer: 'I cannot tell.' });
    assert.deepEqual(parseAgentReply('CALL ftp://x'), { type: 'done', answer: 'CALL ftp://x' });
  });

  it('lets the echoing fake LLM read every allowed page in order, then finish', () => {
    const history = [];
    const actions = [];
    for (let turn = 0; turn < 5; turn += 1) {
      const action = parseAgentReply(fakeReply(agentTurnMessage('goal', urls, history, true)));
      actions.push(action.type === 'call' ? action.url : 'done');
      if (action.type === 'done') break;
      history.push(read(action.url));
    }
    assert.deepEqual(actions, [...urls, 'done']);
  });

  it('suggests DONE once no turn is left', () => {
    const message = agentTurnMessage('goal', urls, [], false);
    assert.match(message, /^DONE is next: no turn is left/);
    assert.equal(parseAgentReply(fakeReply(message)).type, 'done');
  });

  it('shows the goal, the allowed pages and the history to the model', () => {
    const message = agentTurnMessage(
      'why queues?',
      urls,
      [
        read(urls[0] ?? ''),
        { kind: 'refused', url: 'http://evil/', reason: 'not an allowed page' },
      ],
      true,
    );
    assert.match(message, /Goal: why queues\?/);
    assert.match(message, /- http:\/\/127\.0\.0\.1:9\/b/);
    assert.match(message, /1\. read http:\/\/127\.0\.0\.1:9\/a \(HTTP 200\): x/);
    assert.match(message, /2\. refused http:\/\/evil\/: not an allowed page/);
  });
});
