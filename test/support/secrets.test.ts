/**
 * The suite-wide secret check (secrets.ts): what counts as a leak, that failure messages never
 * repeat the secret, and that stopping a {@link ServiceProcess} that printed one fails.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { before, describe, it } from 'node:test';
import {
  SecretLeakError,
  findSecretLeaks,
  maskSecrets,
  registerSecret,
  registerUrlPassword,
  registeredSecrets,
} from './secrets.js';
import { ensureServiceBundles } from '@sluice/service-bundles';
import { ServiceProcess } from './service-process.js';

const LLM_KEY = `llm-${randomBytes(8).toString('hex')}`;
const API_KEY = `slk_${randomBytes(24).toString('base64url')}`;
registerSecret(LLM_KEY, 'LLM API key');
registerSecret(API_KEY, 'tenant API key');

describe('findSecretLeaks', () => {
  it('finds a registered secret in stdout or stderr, naming the line', () => {
    const leaks = findSecretLeaks({
      stdout: ['{"msg":"fine"}', `{"msg":"calling","auth":"Bearer ${LLM_KEY}"}`],
      stderr: [`failed with key=${API_KEY}`],
    });
    assert.deepEqual(
      leaks.map((l) => [l.stream, l.lineNumber, l.label]),
      [
        ['stdout', 2, 'LLM API key'],
        ['stderr', 1, 'tenant API key'],
      ],
    );
    for (const leak of leaks) {
      assert.ok(!leak.maskedLine.includes(LLM_KEY) && !leak.maskedLine.includes(API_KEY));
    }
  });

  it('finds an API key by its shape, registered or not', () => {
    const unregistered = `slk_${randomBytes(24).toString('base64url')}`;
    const [leak] = findSecretLeaks({ stdout: [`"key":"${unregistered}"`], stderr: [] });
    assert.equal(leak?.label, 'Sluice API key (by shape)');
    assert.ok(!leak.maskedLine.includes(unregistered));
  });

  it('ignores a key prefix, and a secret inside a longer word', () => {
    registerSecret('sk-trace', 'short LLM key');
    const lines = [
      `{"key_prefix":"${API_KEY.slice(0, 10)}","msg":"API key created"}`,
      '{"prefix":"e2e_task-trace_1","msg":"started"}',
    ];
    assert.deepEqual(findSecretLeaks({ stdout: lines, stderr: [] }), []);
    assert.equal(findSecretLeaks({ stdout: ['"Bearer sk-trace"'], stderr: [] }).length, 1);
  });

  it('registers the password of a URL, not one without', () => {
    registerUrlPassword('postgres://postgres@127.0.0.1:5432/x', 'no password');
    registerUrlPassword('postgres://u:p%40ss-word-1@127.0.0.1:5432/x', 'DATABASE_URL password');
    const labels = registeredSecrets().map((s) => s.label);
    assert.ok(!labels.includes('no password'));
    assert.ok(registeredSecrets().some((s) => s.value === 'p@ss-word-1'));
    assert.equal(maskSecrets('x p@ss-word-1 y').includes('p@ss-word-1'), false);
  });
});

describe('ServiceProcess.stop', () => {
  before(() => ensureServiceBundles());

  it('fails when the service printed a secret, naming it and the line, the secret masked', async () => {
    // A service that stops at once on its configuration, naming the variable on stderr: that
    // name stands in for a secret it printed.
    const standIn = 'SLUICE_LOG_LEVEL';
    const process = new ServiceProcess({
      name: 'leaky-gateway',
      service: 'gateway',
      env: { SLUICE_LOG_LEVEL: 'verbose' },
    });
    await process.exited;
    assert.doesNotThrow(() => process.assertNoSecretLeaks(), 'nothing registered is printed yet');
    registerSecret(standIn, 'stand-in secret');
    await assert.rejects(process.stop(), (error: unknown) => {
      assert.ok(error instanceof SecretLeakError, String(error));
      assert.equal(error.service, 'leaky-gateway');
      assert.match(error.message, /leaky-gateway printed a secret/);
      assert.match(error.message, /stderr:\d+ \(stand-in secret\)/);
      assert.ok(!error.message.includes(standIn), error.message);
      return true;
    });
  });
});
