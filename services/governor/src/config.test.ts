import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError } from '@sluice/runtime';
import { loadGovernorConfig } from './config.js';

describe('loadGovernorConfig', () => {
  it('opens two connections to Postgres unless told otherwise, never fewer', () => {
    assert.equal(loadGovernorConfig({}).SLUICE_DB_POOL_SIZE, 2);
    assert.equal(loadGovernorConfig({ SLUICE_DB_POOL_SIZE: '4' }).SLUICE_DB_POOL_SIZE, 4);
    assert.throws(
      () => loadGovernorConfig({ SLUICE_DB_POOL_SIZE: '1' }),
      (error: unknown) => error instanceof ConfigError && error.variable === 'SLUICE_DB_POOL_SIZE',
    );
  });
});
