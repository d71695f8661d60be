import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { describe, it } from 'node:test';
import { createLogger } from '@sluice/telemetry';
import { startBatchLoop } from './batch-loop.js';

const quiet = createLogger({
  service: 'batch-loop-test',
  level: 'fatal',
  destination: new Writable({ write: (_chunk, _encoding, done) => done() }),
});

describe('startBatchLoop', () => {
  it('shows every failed batch to onError and keeps going, even when the hook throws', async () => {
    const seen: string[] = [];
    let batches = 0;
    let succeeded: () => void = () => undefined;
    const done = new Promise<void>((resolve) => (succeeded = resolve));
    const loop = startBatchLoop({
      name: 'test',
      pollMs: 10,
      log: quiet,
      runBatch: () => {
        batches += 1;
        if (batches <= 2) return Promise.reject(new Error(`outage ${batches}`));
        succeeded();
        return Promise.resolve(false);
      },
      onError: (error) => {
        seen.push((error as Error).message);
        throw new Error('a broken hook');
      },
    });
    loop.wake();
    await done;
    await loop.stop();
    assert.deepEqual(seen, ['outage 1', 'outage 2']);
    assert.ok(batches >= 3);
  });
});
