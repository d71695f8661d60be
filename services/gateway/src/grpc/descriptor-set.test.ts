import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import protobuf from 'protobufjs';
import descriptor from 'protobufjs/ext/descriptor/index.js';
import {
  DescriptorSetError,
  fileWithDependencies,
  parseDescriptorSet,
  readDescriptorSet,
} from './descriptor-set.js';

/** Encodes plain FileDescriptorProto objects as a FileDescriptorSet. */
function encodeSet(files: object[]): Uint8Array {
  return descriptor.FileDescriptorSet.encode({ file: files }).finish();
}

/** The top-level field numbers of a serialized message. */
function fieldNumbers(bytes: Uint8Array): number[] {
  const numbers: number[] = [];
  const reader = protobuf.Reader.create(bytes);
  while (reader.pos < reader.len) {
    const tag = reader.uint32();
    numbers.push(tag >>> 3);
    reader.skipType(tag & 7);
  }
  return numbers;
}

describe('readDescriptorSet (proto/sluice.binpb)', () => {
  const set = readDescriptorSet();

  it('holds the API, its imports, health and reflection under their real names', () => {
    assert.deepEqual([...set.files.keys()].sort(), [
      'google/protobuf/duration.proto',
      'google/protobuf/timestamp.proto',
      'grpc/reflection/v1/reflection.proto',
      'grpc/reflection/v1alpha/reflection.proto',
      'health/v1/health.proto',
      'sluice/v1/admin_service.proto',
      'sluice/v1/task.proto',
      'sluice/v1/task_service.proto',
    ]);
  });

  it('indexes every kind of symbol with its file', () => {
    const expected: [string, string, string][] = [
      ['sluice.v1.TaskService', 'service', 'sluice/v1/task_service.proto'],
      ['sluice.v1.TaskService.WatchTask', 'method', 'sluice/v1/task_service.proto'],
      ['sluice.v1.Task', 'message', 'sluice/v1/task.proto'],
      ['sluice.v1.Task.create_time', 'field', 'sluice/v1/task.proto'],
      ['sluice.v1.TaskStatus', 'enum', 'sluice/v1/task.proto'],
      ['sluice.v1.TASK_STATUS_PAUSED', 'enum_value', 'sluice/v1/task.proto'],
      ['grpc.health.v1.HealthCheckResponse.ServingStatus', 'enum', 'health/v1/health.proto'],
      ['grpc.health.v1.HealthCheckResponse.SERVING', 'enum_value', 'health/v1/health.proto'],
      [
        'grpc.reflection.v1.ServerReflectionRequest.message_request',
        'oneof',
        'grpc/reflection/v1/reflection.proto',
      ],
      ['google.protobuf.Timestamp', 'message', 'google/protobuf/timestamp.proto'],
    ];
    for (const [name, kind, file] of expected) {
      assert.deepEqual(set.symbols.get(name), { kind, file }, name);
    }
  });

  it("serves files without Buf's image metadata (field 8042)", () => {
    for (const file of set.files.values()) {
      assert.ok(!fieldNumbers(file.bytes).includes(8042), file.name);
      assert.ok(fieldNumbers(file.bytes).includes(1), `${file.name} keeps its name`);
    }
  });

  it('lists a file with its transitive dependencies, nearest first', () => {
    assert.deepEqual(
      fileWithDependencies(set, 'sluice/v1/task_service.proto').map((f) => f.name),
      [
        'sluice/v1/task_service.proto',
        'google/protobuf/timestamp.proto',
        'sluice/v1/task.proto',
        'google/protobuf/duration.proto',
      ],
    );
  });

  it('re-encodes exactly the served files', () => {
    const again = parseDescriptorSet(set.bytes, 'again');
    assert.deepEqual(
      [...again.files.values()].map((f) => Buffer.from(f.bytes).toString('hex')),
      [...set.files.values()].map((f) => Buffer.from(f.bytes).toString('hex')),
    );
  });
});

describe('parseDescriptorSet', () => {
  it('drops the Buf image field and nothing else', () => {
    const plain = descriptor.FileDescriptorProto.encode({ name: 'a.proto', package: 'a' }).finish();
    const bufExtension = protobuf.Writer.create()
      .uint32((8042 << 3) | 2)
      .bytes(new Uint8Array([8, 1]))
      .finish();
    const image = protobuf.Writer.create()
      .uint32((1 << 3) | 2)
      .bytes(Buffer.concat([plain, bufExtension]))
      .finish();
    const file = parseDescriptorSet(image, 'image').files.get('a.proto');
    assert.deepEqual(Buffer.from(file?.bytes ?? []), Buffer.from(plain));
  });

  it('rejects a set whose file imports one it does not contain', () => {
    const bytes = encodeSet([{ name: 'a.proto', dependency: ['google/protobuf/timestamp.proto'] }]);
    assert.throws(
      () => parseDescriptorSet(bytes, 'test.binpb'),
      (err: unknown) =>
        err instanceof DescriptorSetError &&
        /a\.proto imports google\/protobuf\/timestamp\.proto, which the set does not contain/.test(
          err.message,
        ) &&
        err.message.includes('npm run proto:build'),
    );
  });

  it('rejects two definitions of one symbol', () => {
    const bytes = encodeSet([
      { name: 'a.proto', package: 'p', messageType: [{ name: 'M' }] },
      { name: 'b.proto', package: 'p', messageType: [{ name: 'M' }] },
    ]);
    assert.throws(
      () => parseDescriptorSet(bytes, 'x'),
      /p\.M is defined in both a\.proto and b\.proto/,
    );
  });

  it('rejects bytes that are not a descriptor set', () => {
    assert.throws(
      () => parseDescriptorSet(Buffer.from('not a descriptor set'), 'junk.binpb'),
      (err: unknown) =>
        err instanceof DescriptorSetError &&
        /junk\.binpb is not a valid descriptor set/.test(err.message),
    );
  });

  it('indexes extensions by extended type and number', () => {
    const bytes = encodeSet([
      { name: 'base.proto', package: 'p', messageType: [{ name: 'Base' }] },
      {
        name: 'ext.proto',
        package: 'q',
        dependency: ['base.proto'],
        extension: [{ name: 'extra', number: 100, extendee: '.p.Base', type: 9, label: 1 }],
      },
    ]);
    const set = parseDescriptorSet(bytes, 'x');
    assert.equal(set.extensions.get('p.Base')?.get(100), 'ext.proto');
    assert.deepEqual(set.symbols.get('q.extra'), { kind: 'extension', file: 'ext.proto' });
  });
});
