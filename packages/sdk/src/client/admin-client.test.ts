import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createAdminClient } from './admin-client.js';

describe('createAdminClient', () => {
  it('rejects, not throws, an override whose ttlMs no Duration can carry', async () => {
    // Nothing listens there: the ttl is refused before any call is made.
    const admin = createAdminClient({
      address: '127.0.0.1:9',
      apiKey: 'sk_test',
      timeoutMs: 1_000,
    });
    try {
      for (const ttlMs of [Number.POSITIVE_INFINITY, Number.NaN]) {
        let set: Promise<unknown> | undefined;
        assert.doesNotThrow(() => {
          set = admin.setOverride({
            kind: 'OVERRIDE_KIND_PRIORITY',
            target: '3',
            value: 'hold',
            reason: 'maintenance',
            ttlMs,
          });
        });
        await assert.rejects(set as Promise<unknown>, RangeError);
      }
    } finally {
      admin.close();
    }
  });
});
