import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { storableText } from './storable-text.js';

describe('storableText', () => {
  it('shows U+0000 as U+FFFD', () => {
    assert.equal(storableText('a\u0000b'), 'a\uFFFDb');
  });

  it('shows a lone surrogate as U+FFFD, which jsonb would refuse (a message cut inside an emoji)', () => {
    // classifyStepError keeps the first 2,000 UTF-16 units of a message: a cut between the two
    // halves of an emoji leaves a lone high surrogate, which JSON.stringify writes as `\ud83d` and
    // Postgres refuses ("Unicode low surrogate must follow a high surrogate").
    const cut = `${'x'.repeat(1_999)}😀 and more`.slice(0, 2_000);
    assert.equal(storableText(cut).slice(-2), 'x\uFFFD');
    assert.equal(storableText(cut).length, 2_000);
    assert.equal(storableText('\udc00 low first'), '\uFFFD low first');
    assert.equal(storableText('ok 😀 \ud83d'), 'ok 😀 \uFFFD');
  });

  it('keeps well-formed text as it is', () => {
    const text = 'naïve 😀 日本語';
    assert.equal(storableText(text), text);
  });
});
