import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { COMMON_ENV, ConfigError, intVar, loadEnvConfig } from './config.js';

describe('loadEnvConfig', () => {
  it('applies defaults', () => {
    const config = loadEnvConfig(COMMON_ENV, {});
    assert.equal(config.NATS_URL, 'nats://127.0.0.1:4222');
    assert.equal(config.SLUICE_PREFIX, 'sluice');
    assert.equal(config.SLUICE_METRICS_PORT, 0);
  });

  it('names the variable of a bad value', () => {
    const cases: Array<[Record<string, string>, string]> = [
      [{ NATS_URL: 'http://x' }, 'NATS_URL'],
      [{ DATABASE_URL: 'not a url' }, 'DATABASE_URL'],
      [{ SLUICE_PREFIX: 'Bad-Prefix' }, 'SLUICE_PREFIX'],
      [{ SLUICE_LOG_LEVEL: 'loud' }, 'SLUICE_LOG_LEVEL'],
      [{ SLUICE_METRICS_PORT: '70000' }, 'SLUICE_METRICS_PORT'],
      [{ SLUICE_METRICS_PORT: '12ab' }, 'SLUICE_METRICS_PORT'],
    ];
    for (const [env, variable] of cases) {
      assert.throws(
        () => loadEnvConfig(COMMON_ENV, env),
        (error: unknown) =>
          error instanceof ConfigError &&
          error.variable === variable &&
          error.message.startsWith(`configuration error: ${variable}: `),
        variable,
      );
    }
  });

  it('parses whole numbers within bounds', () => {
    assert.deepEqual(loadEnvConfig({ N: intVar(5, 1, 10) }, { N: ' 7 ' }), { N: 7 });
    assert.deepEqual(loadEnvConfig({ N: intVar(5, 1, 10) }, {}), { N: 5 });
  });
});
