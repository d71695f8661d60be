import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError } from '@sluice/runtime';
import { loadExecutorConfig } from './config.js';

describe('loadExecutorConfig', () => {
  it('refuses a latency tolerance that makes every LLM success a slow one', () => {
    // At 100 % or less each success no faster than the fastest seen is a strike: the LLM limit
    // sank to its minimum under any load and stayed there, with no error to say why.
    for (const percent of ['1', '50', '100']) {
      assert.throws(
        () =>
          loadExecutorConfig(
            { SLUICE_RESOURCE: 'llm', SLUICE_LLM_LATENCY_TOLERANCE_PERCENT: percent },
            [],
          ),
        (error) =>
          error instanceof ConfigError &&
          /SLUICE_LLM_LATENCY_TOLERANCE_PERCENT/.test(error.message),
        percent,
      );
    }
    for (const [percent, expected] of [
      ['0', 0],
      ['101', 101],
      ['400', 400],
    ] as const) {
      const config = loadExecutorConfig(
        { SLUICE_RESOURCE: 'llm', SLUICE_LLM_LATENCY_TOLERANCE_PERCENT: percent },
        [],
      );
      assert.equal(config.SLUICE_LLM_LATENCY_TOLERANCE_PERCENT, expected);
    }
  });
});
