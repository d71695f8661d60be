import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError } from '@sluice/runtime';
import { loadGatewayConfig } from './config.js';
import { createFaultInjection } from './fault-injection.js';

describe('fault injection', () => {
  it('crashes after a create commit only when that fault is set', () => {
    let crashes = 0;
    const crash = () => {
      crashes += 1;
    };
    createFaultInjection(undefined, crash).afterCreateCommit();
    assert.equal(crashes, 0);
    createFaultInjection('crash_after_create_commit', crash).afterCreateCommit();
    assert.equal(crashes, 1);
  });

  it('reads SLUICE_FAULT_INJECTION: unset or empty is no fault, a known fault is kept', () => {
    assert.equal(loadGatewayConfig({}).SLUICE_FAULT_INJECTION, undefined);
    assert.equal(
      loadGatewayConfig({ SLUICE_FAULT_INJECTION: '' }).SLUICE_FAULT_INJECTION,
      undefined,
    );
    assert.equal(
      loadGatewayConfig({ SLUICE_FAULT_INJECTION: 'crash_after_create_commit' })
        .SLUICE_FAULT_INJECTION,
      'crash_after_create_commit',
    );
  });

  it('refuses an unknown fault as a configuration error naming the variable', () => {
    for (const value of ['crash', 'CRASH_AFTER_CREATE_COMMIT', 'crash_after_create_commit ']) {
      assert.throws(
        () => loadGatewayConfig({ SLUICE_FAULT_INJECTION: value }),
        (error: unknown) =>
          error instanceof ConfigError &&
          error.variable === 'SLUICE_FAULT_INJECTION' &&
          /crash_after_create_commit/.test(error.message),
      );
    }
  });
});
