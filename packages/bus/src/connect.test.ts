import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { describe, it } from 'node:test';
import { SluiceErrorCode, isSluiceError } from '@sluice/core';
import { closeNats, connectNats, MIN_SERVER_VERSION, serverProblem } from './connect.js';
import { natsUrl, startNatsServer } from './testing/index.js';

/** Debian installs nats-server to /usr/sbin, which is not on every PATH. */
const NATS_SERVER = existsSync('/usr/sbin/nats-server') ? '/usr/sbin/nats-server' : 'nats-server';

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      probe.close(() => {
        if (address !== null && typeof address === 'object') resolve(address.port);
        else reject(new Error('no port'));
      });
    });
  });
}

describe('serverProblem', () => {
  it('accepts 2.9.0 and newer with JetStream', () => {
    for (const v of [MIN_SERVER_VERSION, '2.9.10', 'v2.10.27', '2.12.1-RC.2', '3.0.0']) {
      assert.equal(serverProblem(v, true), undefined, v);
    }
  });

  it('refuses older servers, unreadable versions and servers without JetStream', () => {
    for (const v of ['2.8.4', '1.99.99', 'v2.2.0']) {
      assert.match(serverProblem(v, true) ?? '', /too old/, v);
    }
    assert.match(serverProblem('banana', true) ?? '', /unreadable/);
    assert.match(serverProblem(undefined, true) ?? '', /unreadable/);
    assert.match(serverProblem('2.9.10', false) ?? '', /JetStream disabled/);
  });
});

describe('connectNats', () => {
  it('connects to the shared server and closes within the bound', async () => {
    const nc = await connectNats({ url: ` ${natsUrl()} , `, name: 'bus-connect-test' });
    assert.equal(serverProblem(nc.info?.version, nc.info?.jetstream), undefined);
    await closeNats(nc, 2_000);
    assert.ok(nc.isClosed());
    await closeNats(nc); // closing twice is harmless
  });

  it('waits for a server that is still starting instead of failing at once', async () => {
    const server = await startNatsServer();
    try {
      await server.stop();
      const connecting = connectNats({ url: server.url, name: 'bus-connect-late' });
      await new Promise((resolve) => setTimeout(resolve, 300));
      await server.restart();
      const nc = await connecting;
      assert.equal(nc.isClosed(), false);
      await closeNats(nc, 1_000);
    } finally {
      await server[Symbol.asyncDispose]();
    }
  });

  it('closes hard when a drain cannot finish in time', async () => {
    const server = await startNatsServer();
    try {
      const nc = await connectNats({ url: server.url, name: 'bus-close-hard' });
      await server.kill();
      const started = Date.now();
      await closeNats(nc, 300);
      assert.ok(nc.isClosed());
      assert.ok(Date.now() - started < 3_000);
    } finally {
      await server[Symbol.asyncDispose]();
    }
  });

  it('refuses a server without JetStream with a clear error', async () => {
    const port = await freePort();
    const child = spawn(NATS_SERVER, ['-a', '127.0.0.1', '-p', String(port)], { stdio: 'ignore' });
    try {
      await assert.rejects(
        connectNats({ url: `nats://127.0.0.1:${port}`, name: 'bus-no-js' }),
        (err: unknown) =>
          isSluiceError(err, SluiceErrorCode.FailedPrecondition) &&
          /JetStream disabled/.test(err.message),
      );
    } finally {
      child.kill('SIGKILL');
    }
  });
});
