/**
 * The gateway's gRPC wire surface, seen the way grpcurl sees it: a client that knows nothing but
 * the server-reflection protocol lists the services, fetches their descriptors, checks that every
 * type they use resolves strictly through each file's own imports, builds clients from those
 * descriptors alone, and calls the server with them.
 *
 * The TaskService handlers here are trivial on purpose: this is about the surface, not the logic.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { createLogger } from '@sluice/telemetry';
import protobuf from 'protobufjs';
import descriptor from 'protobufjs/ext/descriptor/index.js';
import {
  toTimestamp,
  type CreateTaskRequest,
  type ListTenantsRequest,
  type Task,
  type Tenant,
} from '@sluice/api';
import { createGrpcServer } from '../../services/gateway/src/grpc/index.js';
import type { GrpcServer } from '../../services/gateway/src/grpc/index.js';

const PROTO_ROOT = fileURLToPath(new URL('../../proto', import.meta.url));
const CALL_TIMEOUT_MS = 5_000;

const TASK_SERVICE_METHODS = [
  'CreateTask',
  'CreateTasks',
  'GetTask',
  'WatchTask',
  'ListTasks',
  'CancelTask',
  'ApproveTask',
  'PauseTask',
  'ResumeTask',
  'RetryTask',
];

const ADMIN_SERVICE_METHODS = [
  'CreateTenant',
  'ListTenants',
  'CreateApiKey',
  'ListApiKeys',
  'RevokeApiKey',
  'ListDeadLetters',
  'RedriveDeadLetters',
  'PurgeDeadLetters',
  'GetPressure',
  'SetOverride',
  'ClearOverride',
];

// ---------------------------------------------------------------------------------------------
// A reflection client built from the protocol's .proto file, independent of the server's
// descriptor set.

interface ReflectionRequest {
  host?: string;
  file_by_filename?: string;
  file_containing_symbol?: string;
  file_containing_extension?: { containing_type: string; extension_number: number };
  all_extension_numbers_of_type?: string;
  list_services?: string;
}

interface ReflectionResponse {
  valid_host: string;
  original_request: ReflectionRequest | null;
  message_response?: string;
  file_descriptor_response?: { file_descriptor_proto: Buffer[] };
  all_extension_numbers_response?: { base_type_name: string; extension_number: number[] };
  list_services_response?: { service: { name: string }[] };
  error_response?: { error_code: number; error_message: string };
}

type ReflectionMethod = protoLoader.MethodDefinition<ReflectionRequest, ReflectionResponse>;

function loadReflectionMethod(version: 'v1' | 'v1alpha'): ReflectionMethod {
  const definition = protoLoader.loadSync(`grpc/reflection/${version}/reflection.proto`, {
    includeDirs: [PROTO_ROOT],
    keepCase: true,
    defaults: true,
    oneofs: true,
  });
  const service = definition[`grpc.reflection.${version}.ServerReflection`];
  assert.ok(service !== undefined && !('format' in service), 'reflection service not loaded');
  const method = service.ServerReflectionInfo;
  assert.ok(method !== undefined);
  return method as unknown as ReflectionMethod;
}

/** Sends `requests` on one reflection stream and collects the answers. */
function reflect(
  client: grpc.Client,
  method: ReflectionMethod,
  requests: ReflectionRequest[],
): Promise<ReflectionResponse[]> {
  return new Promise((resolve, reject) => {
    const call = client.makeBidiStreamRequest(
      method.path,
      method.requestSerialize,
      method.responseDeserialize,
      new grpc.Metadata(),
      { deadline: Date.now() + CALL_TIMEOUT_MS },
    );
    const responses: ReflectionResponse[] = [];
    call.on('data', (response: ReflectionResponse) => responses.push(response));
    call.on('error', reject);
    call.on('end', () => resolve(responses));
    for (const request of requests) call.write(request);
    call.end();
  });
}

async function reflectOne(
  client: grpc.Client,
  method: ReflectionMethod,
  request: ReflectionRequest,
): Promise<ReflectionResponse> {
  const [response, ...rest] = await reflect(client, method, [request]);
  assert.equal(rest.length, 0, 'one answer per request');
  assert.ok(response !== undefined, 'no answer');
  return response;
}

/** The serialized files of a file-descriptor answer, failing on any other answer. */
function filesOf(response: ReflectionResponse): Buffer[] {
  assert.equal(
    response.message_response,
    'file_descriptor_response',
    `expected descriptors, got ${JSON.stringify(response.error_response ?? response)}`,
  );
  return response.file_descriptor_response?.file_descriptor_proto ?? [];
}

// ---------------------------------------------------------------------------------------------
// Strict resolution, as grpcurl (protoreflect's desc.CreateFileDescriptors) performs it: a type
// used by a file must be defined in that file, in a file it imports, or in a file made visible
// through a chain of `import public` starting at one of its imports. Nothing else counts.

interface DecodedFile {
  name: string;
  package?: string;
  dependency: string[];
  publicDependency: number[];
  messageType: DecodedMessage[];
  enumType: { name: string }[];
  service: DecodedService[];
  extension: DecodedField[];
  sourceCodeInfo?: { location: { path: number[]; leadingComments?: string }[] };
}
interface DecodedMessage {
  name: string;
  field: DecodedField[];
  nestedType: DecodedMessage[];
  enumType: { name: string }[];
  extension: DecodedField[];
}
interface DecodedField {
  name: string;
  typeName?: string;
  extendee?: string;
}
interface DecodedService {
  name: string;
  method: DecodedMethod[];
}
interface DecodedMethod {
  name: string;
  inputType: string;
  outputType: string;
  clientStreaming?: boolean;
  serverStreaming?: boolean;
}

function decodeFile(bytes: Uint8Array): DecodedFile {
  const message = descriptor.FileDescriptorProto.decode(bytes);
  return descriptor.FileDescriptorProto.toObject(message, { arrays: true }) as DecodedFile;
}

/** Fully-qualified names (leading dot) of the types a file defines. */
function definedTypes(file: DecodedFile): Set<string> {
  const defined = new Set<string>();
  const prefix = file.package ? `.${file.package}` : '';
  const addMessages = (scope: string, messages: DecodedMessage[]): void => {
    for (const message of messages) {
      const name = `${scope}.${message.name}`;
      defined.add(name);
      for (const nestedEnum of message.enumType) defined.add(`${name}.${nestedEnum.name}`);
      addMessages(name, message.nestedType);
    }
  };
  addMessages(prefix, file.messageType);
  for (const enumType of file.enumType) defined.add(`${prefix}.${enumType.name}`);
  return defined;
}

/** Every type name a file refers to, with where it is used. */
function referencedTypes(file: DecodedFile): { typeName: string; usedBy: string }[] {
  const references: { typeName: string; usedBy: string }[] = [];
  const fromFields = (owner: string, fields: DecodedField[]): void => {
    for (const field of fields) {
      if (field.typeName)
        references.push({ typeName: field.typeName, usedBy: `${owner}.${field.name}` });
      if (field.extendee)
        references.push({ typeName: field.extendee, usedBy: `${owner}.${field.name}` });
    }
  };
  const fromMessages = (scope: string, messages: DecodedMessage[]): void => {
    for (const message of messages) {
      const name = `${scope}.${message.name}`;
      fromFields(name, message.field);
      fromFields(name, message.extension);
      fromMessages(name, message.nestedType);
    }
  };
  const prefix = file.package ? `.${file.package}` : '';
  fromMessages(prefix, file.messageType);
  fromFields(prefix, file.extension);
  for (const service of file.service) {
    for (const method of service.method) {
      const usedBy = `${prefix}.${service.name}.${method.name}`;
      references.push(
        { typeName: method.inputType, usedBy },
        { typeName: method.outputType, usedBy },
      );
    }
  }
  return references;
}

/**
 * Throws unless every type used by every file resolves through the file itself, its declared
 * imports, and public imports reachable from those — grpcurl's rule.
 */
function assertStrictlyResolvable(files: ReadonlyMap<string, DecodedFile>): void {
  const fileNamed = (name: string, importedBy: string): DecodedFile => {
    const file = files.get(name);
    if (file === undefined) {
      throw new Error(`${importedBy} imports ${name}, but reflection did not return it`);
    }
    return file;
  };
  const publicClosure = (file: DecodedFile, into: Set<string>): void => {
    for (const index of file.publicDependency) {
      const name = file.dependency[index];
      if (name === undefined) throw new Error(`${file.name}: bad public_dependency ${index}`);
      if (into.has(name)) continue;
      into.add(name);
      publicClosure(fileNamed(name, file.name), into);
    }
  };

  for (const file of files.values()) {
    const visibleFiles = new Set<string>([file.name]);
    for (const dependency of file.dependency) {
      visibleFiles.add(dependency);
      publicClosure(fileNamed(dependency, file.name), visibleFiles);
    }
    const visible = new Set<string>();
    for (const name of visibleFiles) {
      for (const type of definedTypes(fileNamed(name, file.name))) visible.add(type);
    }
    for (const { typeName, usedBy } of referencedTypes(file)) {
      if (!typeName.startsWith('.')) {
        throw new Error(`${file.name}: ${usedBy} uses "${typeName}", which is not fully qualified`);
      }
      if (visible.has(typeName)) continue;
      const definedIn = [...files.values()].find((other) => definedTypes(other).has(typeName));
      throw new Error(
        definedIn === undefined
          ? `${file.name}: ${usedBy} uses ${typeName}, which no returned file defines`
          : `${file.name}: ${usedBy} uses ${typeName}, defined in ${definedIn.name}, ` +
              `which is not imported by ${file.name}`,
      );
    }
  }
}

/** Decodes reflection's answer, checks it strictly and builds proto-loader definitions from it. */
function strictDefinitions(serialized: Buffer[]): {
  files: Map<string, DecodedFile>;
  definitions: protoLoader.PackageDefinition;
} {
  const files = new Map<string, DecodedFile>();
  for (const bytes of serialized) {
    const file = decodeFile(bytes);
    files.set(file.name, file);
  }
  assertStrictlyResolvable(files);
  const set = protobuf.Writer.create();
  for (const bytes of serialized) set.uint32((1 << 3) | 2).bytes(bytes); // FileDescriptorSet.file
  const definitions = protoLoader.loadFileDescriptorSetFromBuffer(Buffer.from(set.finish()), {
    keepCase: true,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  return { files, definitions };
}

function methodOf(
  definitions: protoLoader.PackageDefinition,
  service: string,
  method: string,
): protoLoader.MethodDefinition<object, object> {
  const definition = definitions[service];
  assert.ok(definition !== undefined && !('format' in definition), `no service ${service}`);
  const found = definition[method];
  assert.ok(found !== undefined, `no method ${service}/${method}`);
  return found;
}

function unaryCall<Res>(
  client: grpc.Client,
  method: protoLoader.MethodDefinition<object, object>,
  request: object,
): Promise<Res> {
  return new Promise((resolve, reject) => {
    client.makeUnaryRequest(
      method.path,
      method.requestSerialize,
      method.responseDeserialize,
      request,
      new grpc.Metadata(),
      { deadline: Date.now() + CALL_TIMEOUT_MS },
      (err, response) => (err ? reject(err) : resolve(response as Res)),
    );
  });
}

// ---------------------------------------------------------------------------------------------

describe('gRPC surface through server reflection', () => {
  let server: GrpcServer;
  let client: grpc.Client;
  let received: CreateTaskRequest | undefined;
  let receivedListTenants: ListTenantsRequest | undefined;
  const v1 = loadReflectionMethod('v1');
  const v1alpha = loadReflectionMethod('v1alpha');
  const createTime = new Date('2026-01-02T03:04:05.678Z');

  before(async () => {
    server = createGrpcServer({
      logger: createLogger({ service: 'reflection-test', level: 'silent' }),
      port: 0,
      host: '127.0.0.1',
      taskService: {
        CreateTask(call) {
          received = call.request;
          const task: Task = {
            task_id: 't-1',
            tenant_id: 'tenant-a',
            type: call.request.type,
            type_version: 3,
            priority: 'PRIORITY_P1',
            input: call.request.input,
            idempotency_key: call.request.idempotency_key,
            status: 'TASK_STATUS_QUEUED',
            current_step: '',
            attempt: 1,
            error: null,
            trace_id: '0af7651916cd43dd8448eb211c80319c',
            create_time: toTimestamp(createTime),
            start_time: null,
            finish_time: null,
            update_time: toTimestamp(createTime),
            cancel_requested: false,
            pause_requested: false,
            output: '',
            last_event_seq: '1',
            progress: 0,
            progress_message: '',
            estimated_wait: null,
            queue_position: 0,
            can_cancel: true,
            approval: null,
            next_attempt_time: null,
            waiting_for: '',
          };
          return Promise.resolve({ task, created: true });
        },
      },
      adminService: {
        ListTenants(call) {
          receivedListTenants = call.request;
          const tenant: Tenant = {
            tenant_id: 'tenant-a',
            display_name: 'Tenant A',
            create_time: toTimestamp(createTime),
          };
          return Promise.resolve({ tenants: [tenant], next_page_token: 'next' });
        },
      },
    });
    const port = await server.start();
    client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  });

  after(async () => {
    client?.close();
    await server?.stop(1_000);
  });

  it('lists TaskService, AdminService, health and reflection (v1 and v1alpha)', async () => {
    const expected = [
      'grpc.health.v1.Health',
      'grpc.reflection.v1.ServerReflection',
      'grpc.reflection.v1alpha.ServerReflection',
      'sluice.v1.AdminService',
      'sluice.v1.TaskService',
    ];
    for (const method of [v1, v1alpha]) {
      const response = await reflectOne(client, method, { list_services: '' });
      assert.equal(response.message_response, 'list_services_response');
      const names = response.list_services_response?.service.map((s) => s.name).sort();
      assert.deepEqual(names, expected);
    }
  });

  it('serves TaskService descriptors that resolve strictly and describe all ten methods', async () => {
    const answer = await reflectOne(client, v1, {
      file_containing_symbol: 'sluice.v1.TaskService',
    });
    assert.equal(answer.original_request?.file_containing_symbol, 'sluice.v1.TaskService');
    const { files, definitions } = strictDefinitions(filesOf(answer));

    // The requested file first, then its transitive imports, with their real names.
    assert.deepEqual(
      [...files.keys()],
      [
        'sluice/v1/task_service.proto',
        'google/protobuf/timestamp.proto',
        'sluice/v1/task.proto',
        'google/protobuf/duration.proto',
      ],
    );
    const serviceFile = files.get('sluice/v1/task_service.proto');
    assert.deepEqual(serviceFile?.dependency, [
      'google/protobuf/timestamp.proto',
      'sluice/v1/task.proto',
    ]);
    assert.deepEqual(files.get('sluice/v1/task.proto')?.dependency, [
      'google/protobuf/duration.proto',
      'google/protobuf/timestamp.proto',
    ]);

    const service = serviceFile?.service.find((s) => s.name === 'TaskService');
    assert.ok(service !== undefined);
    assert.deepEqual(
      service.method.map((m) => m.name),
      TASK_SERVICE_METHODS,
    );
    service.method.forEach((method, index) => {
      assert.equal(method.inputType, `.sluice.v1.${method.name}Request`);
      assert.equal(method.outputType, `.sluice.v1.${method.name}Response`);
      assert.equal(method.clientStreaming ?? false, false, `${method.name} client streaming`);
      assert.equal(method.serverStreaming ?? false, method.name === 'WatchTask', method.name);
      // Comments travel with the descriptors (grpcurl describe shows them).
      const location = serviceFile?.sourceCodeInfo?.location.find(
        (l) => l.path.join() === [6, 0, 2, index].join(),
      );
      assert.ok((location?.leadingComments ?? '').trim().length > 0, `${method.name} comment`);
    });

    // The client built from the descriptors agrees.
    for (const name of TASK_SERVICE_METHODS) {
      const method = methodOf(definitions, 'sluice.v1.TaskService', name);
      assert.equal(method.requestStream, false);
      assert.equal(method.responseStream, name === 'WatchTask');
    }
  });

  it('serves AdminService descriptors that resolve strictly and describe all eleven methods', async () => {
    const answer = await reflectOne(client, v1, {
      file_containing_symbol: 'sluice.v1.AdminService',
    });
    const { files, definitions } = strictDefinitions(filesOf(answer));
    assert.deepEqual(
      [...files.keys()],
      [
        'sluice/v1/admin_service.proto',
        'google/protobuf/duration.proto',
        'google/protobuf/timestamp.proto',
        'sluice/v1/task.proto',
      ],
    );
    const serviceFile = files.get('sluice/v1/admin_service.proto');
    const service = serviceFile?.service.find((s) => s.name === 'AdminService');
    assert.ok(service !== undefined);
    assert.deepEqual(
      service.method.map((m) => m.name),
      ADMIN_SERVICE_METHODS,
    );
    service.method.forEach((method, index) => {
      assert.equal(method.inputType, `.sluice.v1.${method.name}Request`);
      assert.equal(method.outputType, `.sluice.v1.${method.name}Response`);
      assert.equal(method.clientStreaming ?? false, false, `${method.name} client streaming`);
      assert.equal(method.serverStreaming ?? false, false, `${method.name} server streaming`);
      const location = serviceFile?.sourceCodeInfo?.location.find(
        (l) => l.path.join() === [6, 0, 2, index].join(),
      );
      assert.ok((location?.leadingComments ?? '').trim().length > 0, `${method.name} comment`);
    });
    for (const name of ADMIN_SERVICE_METHODS) {
      const method = methodOf(definitions, 'sluice.v1.AdminService', name);
      assert.equal(method.requestStream, false);
      assert.equal(method.responseStream, false);
    }
  });

  it('calls AdminService with a client built from reflection alone', async () => {
    const answer = await reflectOne(client, v1, {
      file_containing_symbol: 'sluice.v1.AdminService',
    });
    const { definitions } = strictDefinitions(filesOf(answer));
    const listTenants = methodOf(definitions, 'sluice.v1.AdminService', 'ListTenants');
    const response = await unaryCall<{ tenants: Tenant[]; next_page_token: string }>(
      client,
      listTenants,
      { page_size: 7, page_token: 'abc' },
    );
    assert.deepEqual(receivedListTenants, { page_size: 7, page_token: 'abc' });
    assert.deepEqual(response, {
      tenants: [
        {
          tenant_id: 'tenant-a',
          display_name: 'Tenant A',
          create_time: {
            seconds: String(Math.floor(createTime.getTime() / 1000)),
            nanos: 678_000_000,
          },
        },
      ],
      next_page_token: 'next',
    });
    // A declared method without a handler.
    await assert.rejects(
      unaryCall(client, methodOf(definitions, 'sluice.v1.AdminService', 'RevokeApiKey'), {
        key_id: 'k',
      }),
      (err: grpc.ServiceError) => err.code === grpc.status.UNIMPLEMENTED,
    );
  });

  it('calls CreateTask with a client built from reflection alone', async () => {
    const answer = await reflectOne(client, v1, {
      file_containing_symbol: 'sluice.v1.TaskService',
    });
    const { definitions } = strictDefinitions(filesOf(answer));
    const createTask = methodOf(definitions, 'sluice.v1.TaskService', 'CreateTask');

    const request = {
      type: 'report.generate',
      priority: 'PRIORITY_P1',
      input: '{"topic":"tides"}',
      idempotency_key: 'key-1',
    };
    const response = await unaryCall<{ task: Task | null; created: boolean }>(
      client,
      createTask,
      request,
    );

    assert.deepEqual(received, request, 'the handler sees the request under the proto names');
    assert.equal(response.created, true);
    assert.ok(response.task !== null);
    assert.equal(response.task.task_id, 't-1');
    assert.equal(response.task.tenant_id, 'tenant-a');
    assert.equal(response.task.type, 'report.generate');
    assert.equal(response.task.type_version, 3);
    assert.equal(response.task.priority, 'PRIORITY_P1');
    assert.equal(response.task.input, '{"topic":"tides"}');
    assert.equal(response.task.idempotency_key, 'key-1');
    assert.equal(response.task.status, 'TASK_STATUS_QUEUED');
    assert.equal(response.task.attempt, 1);
    assert.equal(response.task.error, null);
    assert.equal(response.task.trace_id, '0af7651916cd43dd8448eb211c80319c');
    assert.deepEqual(response.task.create_time, {
      seconds: String(Math.floor(createTime.getTime() / 1000)),
      nanos: 678_000_000,
    });
    assert.equal(response.task.start_time, null);
    assert.equal(response.task.last_event_seq, '1');
  });

  it('puts the fields on the wire under their proto numbers (checked without proto-loader)', async () => {
    const answer = await reflectOne(client, v1, {
      file_containing_symbol: 'sluice.v1.TaskService',
    });
    const { definitions } = strictDefinitions(filesOf(answer));
    const createTask = methodOf(definitions, 'sluice.v1.TaskService', 'CreateTask');
    const raw = await new Promise<Buffer>((resolve, reject) => {
      client.makeUnaryRequest(
        createTask.path,
        createTask.requestSerialize,
        (bytes: Buffer) => bytes,
        { type: 'x', priority: 'PRIORITY_P0', input: '{}', idempotency_key: '' },
        new grpc.Metadata(),
        { deadline: Date.now() + CALL_TIMEOUT_MS },
        (err, bytes) =>
          err || bytes === undefined ? reject(err ?? new Error('no bytes')) : resolve(bytes),
      );
    });
    // CreateTaskResponse.task = 1 → Task.task_id = 1; CreateTaskResponse.created = 2.
    const response = readFields(raw);
    const task = response.get(1);
    assert.ok(task instanceof Uint8Array, 'CreateTaskResponse field 1 (task) present');
    assert.equal(response.get(2), 1, 'CreateTaskResponse field 2 (created) is true');
    const taskId = readFields(task).get(1);
    assert.ok(taskId instanceof Uint8Array, 'Task field 1 (task_id) present');
    assert.equal(Buffer.from(taskId).toString('utf8'), 't-1');
    assert.equal(readFields(task).get(5), 2, 'Task field 5 (priority) is PRIORITY_P1 = 2');
  });

  it('answers UNIMPLEMENTED for declared methods without a handler', async () => {
    const answer = await reflectOne(client, v1, {
      file_containing_symbol: 'sluice.v1.TaskService',
    });
    const { definitions } = strictDefinitions(filesOf(answer));
    await assert.rejects(
      unaryCall(client, methodOf(definitions, 'sluice.v1.TaskService', 'ApproveTask'), {
        task_id: 't-1',
        approved: true,
        comment: '',
      }),
      (err: grpc.ServiceError) => err.code === grpc.status.UNIMPLEMENTED,
    );
  });

  it('describes the health service and answers Check with SERVING', async () => {
    const answer = await reflectOne(client, v1, {
      file_containing_symbol: 'grpc.health.v1.Health',
    });
    const { definitions } = strictDefinitions(filesOf(answer));
    const check = methodOf(definitions, 'grpc.health.v1.Health', 'Check');
    for (const service of ['', 'sluice.v1.TaskService', 'sluice.v1.AdminService']) {
      const response = await unaryCall<{ status: string }>(client, check, { service });
      assert.equal(response.status, 'SERVING', `health of "${service}"`);
    }
  });

  it('describes the reflection services themselves', async () => {
    for (const symbol of [
      'grpc.reflection.v1.ServerReflection',
      'grpc.reflection.v1alpha.ServerReflection',
    ]) {
      const answer = await reflectOne(client, v1, { file_containing_symbol: symbol });
      const { definitions } = strictDefinitions(filesOf(answer));
      const method = methodOf(definitions, symbol, 'ServerReflectionInfo');
      assert.equal(method.requestStream, true);
      assert.equal(method.responseStream, true);
    }
  });

  it('finds the file of every kind of symbol, by file name, and answers misses with NOT_FOUND', async () => {
    const queries: [ReflectionRequest, string | number][] = [
      [
        { file_containing_symbol: 'sluice.v1.TaskService.WatchTask' },
        'sluice/v1/task_service.proto',
      ],
      [{ file_containing_symbol: 'sluice.v1.WatchTaskRequest' }, 'sluice/v1/task_service.proto'],
      [{ file_containing_symbol: '.sluice.v1.Task' }, 'sluice/v1/task.proto'],
      [{ file_containing_symbol: 'sluice.v1.Task.task_id' }, 'sluice/v1/task.proto'],
      [{ file_containing_symbol: 'sluice.v1.Priority' }, 'sluice/v1/task.proto'],
      [{ file_containing_symbol: 'sluice.v1.PRIORITY_P0' }, 'sluice/v1/task.proto'],
      [{ file_containing_symbol: 'google.protobuf.Timestamp' }, 'google/protobuf/timestamp.proto'],
      [
        { file_containing_symbol: 'grpc.health.v1.HealthCheckResponse.ServingStatus' },
        'health/v1/health.proto',
      ],
      [{ file_by_filename: 'sluice/v1/task.proto' }, 'sluice/v1/task.proto'],
      [
        { file_containing_symbol: 'sluice.v1.AdminService.RevokeApiKey' },
        'sluice/v1/admin_service.proto',
      ],
      [{ file_containing_symbol: 'sluice.v1.ApiKey.revoke_time' }, 'sluice/v1/admin_service.proto'],
      [{ file_containing_symbol: 'sluice.v1.NoSuchThing' }, grpc.status.NOT_FOUND],
      [{ file_by_filename: 'sluice/v1/nope.proto' }, grpc.status.NOT_FOUND],
      [
        { file_containing_extension: { containing_type: 'sluice.v1.Task', extension_number: 100 } },
        grpc.status.NOT_FOUND,
      ],
      [{ all_extension_numbers_of_type: 'sluice.v1.Nope' }, grpc.status.NOT_FOUND],
    ];
    const answers = await reflect(
      client,
      v1,
      queries.map(([request]) => request),
    );
    assert.equal(answers.length, queries.length, 'one answer per query, on one stream');
    answers.forEach((answer, i) => {
      const [request, expected] = queries[i] ?? [];
      const label = JSON.stringify(request);
      if (typeof expected === 'number') {
        assert.equal(answer.message_response, 'error_response', label);
        assert.equal(answer.error_response?.error_code, expected, label);
      } else {
        const [first] = filesOf(answer);
        assert.ok(first !== undefined, label);
        assert.equal(decodeFile(first).name, expected, label);
      }
    });

    const extensions = await reflectOne(client, v1, {
      all_extension_numbers_of_type: 'sluice.v1.Task',
    });
    assert.deepEqual(extensions.all_extension_numbers_response, {
      base_type_name: 'sluice.v1.Task',
      extension_number: [],
    });
  });

  it('ends the stream with INVALID_ARGUMENT when a request sets no query', async () => {
    await assert.rejects(
      reflect(client, v1, [{ host: 'x' }]),
      (err: grpc.ServiceError) => err.code === grpc.status.INVALID_ARGUMENT,
    );
  });

  it('has a strict check that rejects a file using a type it does not import', async () => {
    // What @grpc/reflection serves (GRPC-NOTES item 2): the type is present, the import is not.
    const answer = await reflectOne(client, v1, { file_containing_symbol: 'sluice.v1.Task' });
    const files = new Map(
      filesOf(answer).map((bytes) => [decodeFile(bytes).name, decodeFile(bytes)]),
    );
    assert.doesNotThrow(() => assertStrictlyResolvable(files));
    const task = files.get('sluice/v1/task.proto');
    assert.ok(task !== undefined);
    files.set(task.name, { ...task, dependency: [] });
    assert.throws(
      () => assertStrictlyResolvable(files),
      /uses \.google\.protobuf\.Timestamp, defined in google\/protobuf\/timestamp\.proto, which is not imported by sluice\/v1\/task\.proto/,
    );
    files.set(task.name, { ...task, dependency: ['google/protobuf/missing.proto'] });
    assert.throws(() => assertStrictlyResolvable(files), /did not return it/);
  });
});

/** The top-level fields of a serialized message: varints as numbers, length-delimited as bytes. */
function readFields(bytes: Uint8Array): Map<number, number | Uint8Array> {
  const fields = new Map<number, number | Uint8Array>();
  const reader = protobuf.Reader.create(bytes);
  while (reader.pos < reader.len) {
    const tag = reader.uint32();
    const wireType = tag & 7;
    if (wireType === 0) fields.set(tag >>> 3, reader.uint32());
    else if (wireType === 2) fields.set(tag >>> 3, reader.bytes());
    else reader.skipType(wireType);
  }
  return fields;
}
