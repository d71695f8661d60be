/**
 * `watchTask` against a stand-in TaskService on a real gRPC server: how a watch ends when its
 * caller aborts it or closes the client while events are still coming, or when its connection
 * dies without a word.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import {
  PROTO_LOADER_OPTIONS,
  PROTO_ROOT,
  TASK_SERVICE_PROTO,
  type WatchTaskResponse,
} from '@sluice/api';
import { createTaskClient } from './task-client.js';

const TASK_ID = '3f1c2a4e-0000-4000-8000-000000000001';

function response(seq: number): WatchTaskResponse {
  return {
    event: {
      task_id: TASK_ID,
      seq: String(seq),
      type: 'step_progress',
      from_status: 'TASK_STATUS_UNSPECIFIED',
      to_status: 'TASK_STATUS_UNSPECIFIED',
      step: 'call',
      create_time: null,
      data: '',
    },
  };
}

type Watch = grpc.ServerWritableStream<unknown, WatchTaskResponse>;

describe('watchTask', () => {
  let server: grpc.Server;
  let address: string;
  /** What the stand-in's WatchTask does with each call. */
  let onWatch: (call: Watch) => void = () => undefined;

  before(async () => {
    const definition = protoLoader.loadSync(TASK_SERVICE_PROTO, {
      ...PROTO_LOADER_OPTIONS,
      includeDirs: [PROTO_ROOT],
    });
    const loaded = grpc.loadPackageDefinition(definition) as unknown as {
      sluice: { v1: { TaskService: grpc.ServiceClientConstructor } };
    };
    server = new grpc.Server();
    server.addService(loaded.sluice.v1.TaskService.service, {
      WatchTask: (call: Watch) => onWatch(call),
    });
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, bound) =>
        error ? reject(error) : resolve(bound),
      ),
    );
    address = `127.0.0.1:${port}`;
  });
  after(() => {
    server.forceShutdown();
  });

  it('yields nothing after its signal aborted, though events had already arrived', async () => {
    // The whole history at once, as a watch of a long-running task replays it.
    onWatch = (call) => {
      for (let seq = 1; seq <= 50; seq += 1) call.write(response(seq));
    };
    const client = createTaskClient({ address, apiKey: 'sk_test' });
    try {
      const stop = new AbortController();
      const seen: string[] = [];
      for await (const event of client.watchTask(TASK_ID, 0, stop.signal)) {
        seen.push(event.seq);
        if (seen.length === 3) {
          // Long enough for the rest of the history to reach the client.
          await new Promise((resolve) => setTimeout(resolve, 200));
          stop.abort();
        }
      }
      assert.deepEqual(seen, ['1', '2', '3']);
    } finally {
      client.close();
    }
  });

  it('ends, and is cancelled on the server, when the client is closed', async () => {
    // A task still running: its watch stays open.
    let cancelled = false;
    onWatch = (call) => {
      call.on('cancelled', () => (cancelled = true));
      call.write(response(1));
    };
    const client = createTaskClient({ address, apiKey: 'sk_test' });
    const watched = (async () => {
      const seen: string[] = [];
      for await (const event of client.watchTask(TASK_ID)) {
        seen.push(event.seq);
        client.close();
      }
      return seen;
    })();
    const outcome = await Promise.race([
      watched.then(
        () => 'ended',
        (error: unknown) => `failed: ${(error as grpc.ServiceError).code}`,
      ),
      new Promise((resolve) => setTimeout(() => resolve('still open after 2 s'), 2_000)),
    ]);
    assert.equal(outcome, `failed: ${grpc.status.CANCELLED}`);
    const deadline = Date.now() + 2_000;
    while (!cancelled && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.ok(cancelled, 'the server saw the watch cancelled');
  });

  it('refuses an afterSeq that is not an event sequence, before any call', async () => {
    const received: string[] = [];
    onWatch = (call) => {
      received.push((call.request as { after_seq: string }).after_seq);
      call.end();
    };
    const client = createTaskClient({ address, apiKey: 'sk_test' });
    try {
      // Sent, these became 1, the whole history (0), and 2^64 - 1.
      for (const afterSeq of [1.5, Number.NaN, -1]) {
        await assert.rejects(async () => {
          for await (const event of client.watchTask(TASK_ID, afterSeq)) void event;
        }, RangeError);
      }
      assert.deepEqual(received, []);
    } finally {
      client.close();
    }
  });

  it('fails UNAVAILABLE once its connection stops answering, instead of waiting for good', async () => {
    // A task still running, between events: the gateway writes nothing for a while.
    onWatch = (call) => {
      call.write(response(1));
    };
    const relay = await startRelay(address);
    const client = createTaskClient({
      address: relay.address,
      apiKey: 'sk_test',
      keepaliveTimeMs: 500,
      keepaliveTimeoutMs: 500,
    });
    try {
      const watched = (async () => {
        for await (const event of client.watchTask(TASK_ID)) {
          // The path to the gateway dies silently: no FIN, no RST, nothing more comes through
          // (a NAT or proxy that lost the connection's state, a host that lost power).
          if (event.seq === '1') relay.blackhole();
        }
      })();
      const outcome = await Promise.race([
        watched.then(
          () => 'ended',
          (error: unknown) => `failed: ${(error as grpc.ServiceError).code}`,
        ),
        new Promise((resolve) => setTimeout(() => resolve('still waiting after 10 s'), 10_000)),
      ]);
      assert.equal(outcome, `failed: ${grpc.status.UNAVAILABLE}`);
    } finally {
      client.close();
      relay.close();
    }
  });
});

/**
 * A TCP relay to `target` whose {@link blackhole} stops it passing anything either way while
 * keeping both connections open, as a path that dies silently does.
 */
async function startRelay(target: string) {
  const [host = '', port = ''] = target.split(':');
  const sockets = new Set<net.Socket>();
  let silent = false;
  const server = net.createServer((inbound) => {
    const outbound = net.connect(Number(port), host);
    sockets.add(inbound).add(outbound);
    const pass = (from: net.Socket, to: net.Socket) => {
      from.on('data', (chunk) => {
        if (!silent) to.write(chunk);
      });
      from.on('error', () => to.destroy());
      from.on('close', () => to.destroy());
    };
    pass(inbound, outbound);
    pass(outbound, inbound);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port: relayPort } = server.address() as net.AddressInfo;
  return {
    address: `127.0.0.1:${relayPort}`,
    blackhole: () => {
      silent = true;
    },
    close: () => {
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
}
