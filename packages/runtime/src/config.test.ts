import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { COMMON_ENV, ConfigError, durationVar, intVar, loadEnvConfig } from './config.js';

describe('loadEnvConfig', () => {
  it('applies defaults', () => {
    const config = loadEnvConfig(COMMON_ENV, {});
    assert.equal(config.NATS_URL, 'nats://127.0.0.1:4222');
    assert.equal(config.SLUICE_PREFIX, 'sluice');
    assert.equal(config.SLUICE_METRICS_PORT, 0);
    assert.equal(config.SLUICE_DB_POOL_SIZE, 10);
  });

  it('names the variable of a bad value', () => {
    const cases: Array<[Record<string, string>, string]> = [
      [{ NATS_URL: 'http://x' }, 'NATS_URL'],
      [{ DATABASE_URL: 'not a url' }, 'DATABASE_URL'],
      [{ SLUICE_PREFIX: 'Bad-Prefix' }, 'SLUICE_PREFIX'],
      [{ SLUICE_LOG_LEVEL: 'loud' }, 'SLUICE_LOG_LEVEL'],
      [{ SLUICE_METRICS_PORT: '70000' }, 'SLUICE_METRICS_PORT'],
      [{ SLUICE_METRICS_PORT: '12ab' }, 'SLUICE_METRICS_PORT'],
      // One connection would be all a scheduler's claim or an executor's outcome writer keeps.
      [{ SLUICE_DB_POOL_SIZE: '1' }, 'SLUICE_DB_POOL_SIZE'],
      [{ SLUICE_DB_POOL_SIZE: 'ten' }, 'SLUICE_DB_POOL_SIZE'],
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

  it('takes NATS_URL as one server or several, comma-separated, as docs/operations.md says', () => {
    for (const value of [
      'nats://a:4222,nats://b:4222',
      'nats://127.0.0.1:4222, tls://127.0.0.2:4223',
      'nats://user:pass@a:4222,nats://user:pass@b:4222,',
    ]) {
      assert.equal(loadEnvConfig(COMMON_ENV, { NATS_URL: value }).NATS_URL, value);
    }
    for (const value of ['nats://a:4222,http://b:4222', 'nats://a:4222,b c', ',']) {
      assert.throws(
        () => loadEnvConfig(COMMON_ENV, { NATS_URL: value }),
        (error: unknown) => error instanceof ConfigError && error.variable === 'NATS_URL',
        value,
      );
    }
  });

  it('parses whole numbers within bounds', () => {
    assert.deepEqual(loadEnvConfig({ N: intVar(5, 1, 10) }, { N: ' 7 ' }), { N: 7 });
    assert.deepEqual(loadEnvConfig({ N: intVar(5, 1, 10) }, {}), { N: 5 });
  });

  it('parses durations with a unit into milliseconds, within bounds', () => {
    const schema = { D: durationVar('7d', 1_000, 400 * 86_400_000) };
    assert.deepEqual(loadEnvConfig(schema, {}), { D: 7 * 86_400_000 });
    assert.deepEqual(loadEnvConfig(schema, { D: ' 36h ' }), { D: 36 * 3_600_000 });
    assert.deepEqual(loadEnvConfig(schema, { D: '90m' }), { D: 90 * 60_000 });
    assert.deepEqual(loadEnvConfig(schema, { D: '1500ms' }), { D: 1_500 });
    for (const bad of ['7', '7 days', '-1d', '1.5h', '999ms', '401d']) {
      assert.throws(
        () => loadEnvConfig(schema, { D: bad }),
        (error: unknown) => error instanceof ConfigError && error.variable === 'D',
        bad,
      );
    }
  });
});
