/**
 * `watchTask` against a stand-in TaskService on a real gRPC server: how a watch ends when its
 * caller aborts it or closes the client while events are still coming.
 */
import assert from 'node:assert/strict';
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
});
