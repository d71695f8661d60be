import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { connect as tcpConnect } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { afterEach, describe, it } from 'node:test';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { prefixProblem } from '@sluice/core';
import { natsUrl, startNatsServer, uniquePrefix } from './index.js';

/** Runs `work` on a fresh connection to `url` and closes it afterwards. */
async function withConnection<T>(url: string, work: (nc: NatsConnection) => Promise<T>) {
  const nc = await connect({ servers: url, reconnect: false });
  try {
    return await work(nc);
  } finally {
    await nc.close();
  }
}

async function createStream(url: string, name: string): Promise<void> {
  await withConnection(url, async (nc) => {
    await (await jetstreamManager(nc)).streams.add({ name, subjects: [`${name}.>`] });
  });
}

async function publish(url: string, subject: string, text: string): Promise<number> {
  return withConnection(url, async (nc) => (await jetstream(nc).publish(subject, text)).seq);
}

/** The payloads stored in a stream, in sequence order. */
async function storedTexts(url: string, stream: string): Promise<string[]> {
  return withConnection(url, async (nc) => {
    const jsm = await jetstreamManager(nc);
    const { state } = await jsm.streams.info(stream);
    const texts: string[] = [];
    for (let seq = state.first_seq; seq <= state.last_seq && state.messages > 0; seq++) {
      const message = await jsm.streams.getMessage(stream, { seq });
      if (message) texts.push(message.string());
    }
    return texts;
  });
}

/** Whether something accepts TCP connections on 127.0.0.1:port. */
function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = tcpConnect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

describe('uniquePrefix', () => {
  it('is a valid prefix and different on every call', () => {
    const prefixes = Array.from({ length: 2000 }, (_, i) =>
      uniquePrefix(i % 2 ? 'bus' : undefined),
    );
    for (const prefix of prefixes) assert.equal(prefixProblem(prefix), undefined, prefix);
    assert.equal(new Set(prefixes).size, prefixes.length);
  });

  it('keeps a cleaned-up, shortened label readable in the prefix', () => {
    const prefix = uniquePrefix('Watch-Task replay, from the very beginning');
    assert.match(prefix, /^t_watch_task_replay_fr[a-z_]*_[a-z0-9]{8}$/);
    assert.equal(prefixProblem(prefix), undefined);
    assert.equal(prefix.length, 32);
  });
});

describe('natsUrl', () => {
  const saved = process.env.NATS_URL;
  afterEach(() => {
    if (saved === undefined) delete process.env.NATS_URL;
    else process.env.NATS_URL = saved;
  });

  it('follows NATS_URL and falls back to the local default port', () => {
    process.env.NATS_URL = 'nats://example.invalid:4333';
    assert.equal(natsUrl(), 'nats://example.invalid:4333');
    delete process.env.NATS_URL;
    assert.equal(natsUrl(), 'nats://127.0.0.1:4222');
  });
});

describe('startNatsServer', () => {
  it('keeps JetStream data across a clean restart and a crash, on the same port', async () => {
    await using server = await startNatsServer();
    const { port } = server;
    assert.notEqual(port, 4222, 'never the shared server');
    const stream = uniquePrefix('restart');
    await createStream(server.url, stream);
    assert.equal(await publish(server.url, `${stream}.a`, 'before restart'), 1);

    await server.restart();
    assert.equal(server.port, port);
    assert.deepEqual(await storedTexts(server.url, stream), ['before restart']);
    assert.equal(await publish(server.url, `${stream}.a`, 'before crash'), 2);

    await server.kill();
    assert.equal(server.running, false);
    assert.equal(await accepts(port), false);
    await server.restart();
    assert.equal(server.running, true);
    assert.deepEqual(await storedTexts(server.url, stream), ['before restart', 'before crash']);
  });

  it('reports an exit it was not asked for, with the end of its log', async () => {
    const reports: string[] = [];
    await using server = await startNatsServer({ onUnexpectedExit: (r) => reports.push(r) });
    await server.kill();
    await server.restart();
    await server.stop();
    await server.restart();
    assert.deepEqual(reports, [], 'kills, stops and restarts asked for are not reported');
    process.kill(server.pid ?? 0, 'SIGKILL'); // a crash, or a signal from elsewhere
    const deadline = Date.now() + 10_000;
    while (reports.length === 0 && Date.now() < deadline) await delay(25);
    assert.equal(reports.length, 1);
    assert.match(reports[0] ?? '', /exited on SIGKILL, not asked to/);
    assert.match(reports[0] ?? '', /Server is ready/, 'the end of its log');
    assert.equal(server.running, false);
  });

  it('stops and removes its temporary store when disposed', async () => {
    let storeDir: string;
    let port: number;
    {
      await using server = await startNatsServer();
      ({ storeDir, port } = server);
      await createStream(server.url, uniquePrefix('dispose'));
      assert.equal(existsSync(storeDir), true);
    }
    assert.equal(existsSync(storeDir), false);
    assert.equal(await accepts(port), false);
  });

  it('keeps a store directory it was given, for the next server to recover', async () => {
    const storeDir = await mkdtemp(path.join(tmpdir(), 'sluice-nats-test-'));
    try {
      const stream = uniquePrefix('given_store');
      {
        await using first = await startNatsServer({ storeDir });
        await createStream(first.url, stream);
        await publish(first.url, `${stream}.x`, 'kept');
      }
      await using second = await startNatsServer({ storeDir });
      assert.deepEqual(await storedTexts(second.url, stream), ['kept']);
    } finally {
      await rm(storeDir, { recursive: true, force: true });
    }
  });
});
