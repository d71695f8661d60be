import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import descriptor from 'protobufjs/ext/descriptor/index.js';
import { parseDescriptorSet, readDescriptorSet } from './descriptor-set.js';
import { loadApi } from './load-api.js';
import { TASK_SERVICE_METHOD_KINDS } from './task-service.js';

interface PlainSet {
  file: {
    name: string;
    enumType?: { name: string; value: { name: string; number: number }[] }[];
    service?: { name: string; method: { name: string }[] }[];
  }[];
}

/** The real descriptor set, changed by `edit`, as a parsed set. */
function editedSet(edit: (set: PlainSet) => void) {
  const decoded = descriptor.FileDescriptorSet.decode(readDescriptorSet().bytes);
  const plain = descriptor.FileDescriptorSet.toObject(decoded, { arrays: true }) as PlainSet;
  edit(plain);
  const bytes = descriptor.FileDescriptorSet.encode(
    descriptor.FileDescriptorSet.fromObject(plain),
  ).finish();
  return parseDescriptorSet(bytes, 'edited.binpb');
}

function fileNamed(set: PlainSet, name: string): PlainSet['file'][number] {
  const file = set.file.find((f) => f.name === name);
  assert.ok(file !== undefined, name);
  return file;
}

describe('loadApi', () => {
  it('loads TaskService with the methods the handlers implement', () => {
    const api = loadApi(readDescriptorSet());
    assert.deepEqual(
      Object.keys(api.taskService).sort(),
      Object.keys(TASK_SERVICE_METHOD_KINDS).sort(),
    );
    assert.equal(api.taskService.WatchTask?.responseStream, true);
    assert.equal(api.taskService.CreateTask?.path, '/sluice.v1.TaskService/CreateTask');
    assert.equal(api.reflectionV1.ServerReflectionInfo?.requestStream, true);
    assert.equal(
      api.reflectionV1alpha.ServerReflectionInfo?.path,
      '/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo',
    );
  });

  it('uses the proto field names and string enums and longs', () => {
    const method = loadApi(readDescriptorSet()).taskService.WatchTask;
    assert.ok(method !== undefined);
    const bytes = method.responseSerialize({
      event: { task_id: 't', seq: '9007199254740993', to_status: 'TASK_STATUS_RUNNING' },
    });
    const decoded = method.responseDeserialize(bytes) as { event: Record<string, unknown> };
    assert.equal(decoded.event.task_id, 't');
    assert.equal(decoded.event.seq, '9007199254740993');
    assert.equal(decoded.event.to_status, 'TASK_STATUS_RUNNING');
    assert.equal(decoded.event.from_status, 'TASK_STATUS_UNSPECIFIED');
    assert.equal(decoded.event.create_time, null);
  });

  it('rejects a set whose enum differs from the TypeScript declaration', () => {
    const set = editedSet((plain) => {
      const priority = fileNamed(plain, 'sluice/v1/task.proto').enumType?.find(
        (e) => e.name === 'Priority',
      );
      priority?.value.push({ name: 'PRIORITY_P4', number: 5 });
    });
    assert.throws(
      () => loadApi(set),
      /edited\.binpb defines sluice\.v1\.Priority as .*PRIORITY_P4=5.*npm run proto:build/,
    );
  });

  it('rejects a set whose TaskService methods differ from the TypeScript declaration', () => {
    const set = editedSet((plain) => {
      const service = fileNamed(plain, 'sluice/v1/task_service.proto').service?.[0];
      service?.method.pop();
    });
    assert.throws(() => loadApi(set), /declares sluice\.v1\.TaskService as \[/);
  });
});
