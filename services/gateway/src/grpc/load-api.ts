/**
 * Builds the grpc-js service definitions the gateway serves from the compiled descriptor set,
 * and checks that the hand-written types of `api-types.ts` / `task-service.ts` /
 * `admin-service.ts` still match it.
 */
import * as protoLoader from '@grpc/proto-loader';
import type { ServiceDefinition } from '@grpc/grpc-js';
import { z } from 'zod';
import {
  ERROR_CLASS_VALUES,
  PRIORITY_VALUES,
  PROTO_LOADER_OPTIONS,
  TASK_STATUS_VALUES,
} from '@sluice/api';
import { DESCRIPTOR_SET_BUILD_COMMAND, DescriptorSetError } from './descriptor-set.js';
import type { DescriptorSet } from './descriptor-set.js';
import { ADMIN_SERVICE_METHOD_KINDS, ADMIN_SERVICE_NAME } from './admin-service.js';
import { TASK_SERVICE_METHOD_KINDS, TASK_SERVICE_NAME } from './task-service.js';

/** The fully-qualified names of the server-reflection services, current and legacy. */
export const REFLECTION_SERVICE_NAMES = {
  v1: 'grpc.reflection.v1.ServerReflection',
  v1alpha: 'grpc.reflection.v1alpha.ServerReflection',
} as const;

/** The service definitions the gateway registers. */
export interface LoadedApi {
  /** `sluice.v1.TaskService`. */
  taskService: ServiceDefinition;
  /** `sluice.v1.AdminService`. */
  adminService: ServiceDefinition;
  /** `grpc.reflection.v1.ServerReflection`. */
  reflectionV1: ServiceDefinition;
  /** `grpc.reflection.v1alpha.ServerReflection`. */
  reflectionV1alpha: ServiceDefinition;
}

/**
 * Loads the service definitions from `descriptorSet` with {@link PROTO_LOADER_OPTIONS}.
 *
 * @throws DescriptorSetError when a service is missing, or the methods of TaskService or
 *   AdminService or the `sluice.v1` enums differ from the TypeScript declarations (the set is
 *   stale: rebuild it).
 */
export function loadApi(descriptorSet: DescriptorSet): LoadedApi {
  const definitions = protoLoader.loadFileDescriptorSetFromBuffer(
    Buffer.from(descriptorSet.bytes),
    { ...PROTO_LOADER_OPTIONS },
  );
  const stale = (problem: string): DescriptorSetError =>
    new DescriptorSetError(
      `${descriptorSet.source} ${problem}; rebuild it with \`${DESCRIPTOR_SET_BUILD_COMMAND}\`, ` +
        'or update the TypeScript declarations in services/gateway/src/grpc',
    );

  const service = (name: string): ServiceDefinition => {
    const definition = definitions[name];
    if (definition === undefined || 'format' in definition) {
      throw stale(`does not define the service ${name}`);
    }
    return definition;
  };

  /** The service `name`, after checking its methods stream as `kinds` declares. */
  const checkedService = (name: string, kinds: Record<string, string>): ServiceDefinition => {
    const definition = service(name);
    const expected = Object.entries(kinds)
      .map(([method, kind]) => `${method}:${kind}`)
      .sort();
    const actual = Object.entries(definition)
      .map(([method, { requestStream, responseStream }]) => {
        if (requestStream) return `${method}:client_streaming`;
        return `${method}:${responseStream ? 'server_streaming' : 'unary'}`;
      })
      .sort();
    if (expected.join() !== actual.join()) {
      throw stale(`declares ${name} as [${actual.join(', ')}], not [${expected.join(', ')}]`);
    }
    return definition;
  };

  const taskService = checkedService(TASK_SERVICE_NAME, TASK_SERVICE_METHOD_KINDS);
  const adminService = checkedService(ADMIN_SERVICE_NAME, ADMIN_SERVICE_METHOD_KINDS);

  const enums: [string, readonly string[]][] = [
    ['sluice.v1.Priority', PRIORITY_VALUES],
    ['sluice.v1.TaskStatus', TASK_STATUS_VALUES],
    ['sluice.v1.ErrorClass', ERROR_CLASS_VALUES],
  ];
  for (const [name, values] of enums) {
    const definition = definitions[name];
    const parsed = EnumDefinitionSchema.safeParse(definition);
    if (!parsed.success) throw stale(`does not define the enum ${name}`);
    const declared = values.map((value, number) => `${value}=${number}`).join();
    const compiled = [...parsed.data.type.value]
      .sort((a, b) => a.number - b.number)
      .map(({ name: value, number }) => `${value}=${number}`)
      .join();
    if (declared !== compiled) throw stale(`defines ${name} as ${compiled}, not ${declared}`);
  }

  return {
    taskService,
    adminService,
    reflectionV1: service(REFLECTION_SERVICE_NAMES.v1),
    reflectionV1alpha: service(REFLECTION_SERVICE_NAMES.v1alpha),
  };
}

const EnumDefinitionSchema = z.object({
  format: z.literal('Protocol Buffer 3 EnumDescriptorProto'),
  type: z.object({
    value: z.array(z.object({ name: z.string(), number: z.number().int() })),
  }),
});
