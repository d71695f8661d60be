import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { UsageError } from './command.js';
import { DEFAULT_ADDRESS, resolveConnection } from './config.js';

describe('resolveConnection', () => {
  it('takes flags over the environment', () => {
    assert.deepEqual(
      resolveConnection(
        { address: 'gw:1', apiKey: 'flag-key' },
        { SLUICE_ADDRESS: 'env:2', SLUICE_API_KEY: 'env-key' },
      ),
      { address: 'gw:1', apiKey: 'flag-key' },
    );
  });

  it('falls back to the environment, then to the default address', () => {
    assert.deepEqual(resolveConnection({}, { SLUICE_ADDRESS: 'env:2', SLUICE_API_KEY: 'k' }), {
      address: 'env:2',
      apiKey: 'k',
    });
    assert.deepEqual(resolveConnection({}, { SLUICE_API_KEY: 'k' }), {
      address: DEFAULT_ADDRESS,
      apiKey: 'k',
    });
  });

  it('refuses a missing or blank key with a usage error naming both ways to give one', () => {
    for (const env of [{}, { SLUICE_API_KEY: '' }, { SLUICE_API_KEY: '  ' }]) {
      assert.throws(
        () => resolveConnection({ apiKey: '' }, env),
        (error: unknown) =>
          error instanceof UsageError &&
          /--api-key <key> or set SLUICE_API_KEY/.test(error.message),
      );
    }
  });

  it('refuses an address without a port or with a URL scheme, naming where it came from', () => {
    // grpc-js connects to port 443 when none is given, and reads http://… as a host name.
    const refused = (address: string, env: Record<string, string>, message: RegExp) =>
      assert.throws(
        () => resolveConnection({ address, apiKey: 'k' }, env),
        (error: unknown) => error instanceof UsageError && message.test(error.message),
        address,
      );
    refused('localhost', {}, /--address needs a port: host:port .*\(got "localhost"\)/);
    refused('', { SLUICE_ADDRESS: 'gw.internal' }, /SLUICE_ADDRESS needs a port/);
    refused('http://gw:50051', {}, /--address is host:port, without http:\/\//);
    refused('[::1]', {}, /--address needs a port/);
    for (const address of ['gw:50051', '[::1]:50051', '10.0.0.7:443', 'dns:///gw:50051']) {
      assert.equal(resolveConnection({ address, apiKey: 'k' }, {}).address, address);
    }
  });
});
