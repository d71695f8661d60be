/**
 * What `createTask` and `createTasks` send as a task's input, against a stand-in TaskService on a
 * real gRPC server that records each request: the caller's value exactly, or nothing at all.
 */
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import {
  PROTO_LOADER_OPTIONS,
  PROTO_ROOT,
  TASK_SERVICE_PROTO,
  type CreateTaskRequest,
} from '@sluice/api';
import { createTaskClient, type CreateTaskParams, type TaskClient } from './task-client.js';

type Unary = grpc.sendUnaryData<unknown>;

describe('the input createTask and createTasks send', () => {
  let server: grpc.Server;
  let client: TaskClient;
  /** Every create entry the stand-in received. */
  let received: CreateTaskRequest[] = [];

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
      CreateTask: (call: grpc.ServerUnaryCall<CreateTaskRequest, unknown>, done: Unary) => {
        received.push(call.request);
        done(null, { created: true });
      },
      CreateTasks: (
        call: grpc.ServerUnaryCall<{ tasks: CreateTaskRequest[] }, unknown>,
        done: Unary,
      ) => {
        received.push(...call.request.tasks);
        done(null, { results: call.request.tasks.map(() => ({ created: true })) });
      },
    });
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, bound) =>
        error ? reject(error) : resolve(bound),
      ),
    );
    client = createTaskClient({ address: `127.0.0.1:${port}`, apiKey: 'sk_test' });
  });
  beforeEach(() => {
    received = [];
  });
  after(() => {
    client?.close();
    server?.forceShutdown();
  });

  const params = (input: unknown): CreateTaskParams => ({
    type: 'brief',
    priority: 'PRIORITY_P2',
    input,
  });

  it('refuses NaN, Infinity, undefined: values JSON would change, naming where', async () => {
    const cases: Array<[unknown, RegExp]> = [
      [{ at: NaN }, /\$\.at is NaN/],
      [{ limits: [1, Infinity] }, /\$\.limits\[1\] is Infinity/],
      [{ score: -Infinity }, /\$\.score is -Infinity/],
      [{ rows: [undefined] }, /\$\.rows\[0\] is undefined/],
      [undefined, /input is undefined/],
      [{ when: new Map([['a', 1]]) }, /\$\.when is a Map/],
    ];
    for (const [input, problem] of cases) {
      await assert.rejects(client.createTask(params(input)), (error: Error) => {
        assert.ok(error instanceof TypeError, `${String(error)}`);
        assert.match(error.message, problem);
        return true;
      });
    }
    await assert.rejects(
      client.createTasks([params({ n: 1 }), params({ at: NaN })]),
      (error: Error) => {
        assert.ok(error instanceof TypeError, `${String(error)}`);
        assert.match(error.message, /^tasks\[1\]\.input: \$\.at is NaN/);
        return true;
      },
    );
    assert.deepEqual(received, [], 'nothing is sent');
  });

  it('sends what JSON.stringify makes of a Date (its toJSON), and a string as it is', async () => {
    const at = new Date('2026-12-07T21:00:00.000Z');
    await client.createTask(params({ at, skip: undefined, list: [{ at }] }));
    await client.createTasks([params({ at }), params('{"raw": true}')]);
    assert.deepEqual(
      received.map((request) => request.input),
      [
        '{"at":"2026-12-07T21:00:00.000Z","list":[{"at":"2026-12-07T21:00:00.000Z"}]}',
        '{"at":"2026-12-07T21:00:00.000Z"}',
        '{"raw": true}',
      ],
    );
  });

  it('sends U+0000 and deep nesting as given, for the gateway to judge', async () => {
    const deep: unknown = JSON.parse('['.repeat(40) + ']'.repeat(40));
    await client.createTask(params({ note: 'a\u0000b', deep }));
    assert.deepEqual(
      received.map((request) => request.input),
      [JSON.stringify({ note: 'a\u0000b', deep })],
    );
  });
});
