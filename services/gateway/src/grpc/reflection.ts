/**
 * gRPC server reflection (`grpc.reflection.v1` and the legacy `v1alpha`, same messages) over
 * the compiled descriptor set.
 *
 * File queries are answered with the compiler's own `FileDescriptorProto`s, unchanged: real file
 * names and `import`s, so a strict client (grpcurl, or anything resolving types only through a
 * file's declared imports) accepts them. Each answer holds the requested file followed by all its
 * transitive dependencies, every time, so a client never depends on what an earlier answer on
 * the same stream carried.
 */
import { status } from '@grpc/grpc-js';
import type { handleBidiStreamingCall } from '@grpc/grpc-js';
import { DescriptorSetError, fileWithDependencies } from './descriptor-set.js';
import type { DescriptorSet } from './descriptor-set.js';
import { invalidArgument, isGrpcError, unavailable } from './status.js';
import type { GrpcError } from './status.js';

/** A `ServerReflectionRequest` as proto-loader decodes it (`oneofs: true`). */
export interface ReflectionRequest {
  host: string;
  /** Which query field is set; absent when none is. */
  message_request?:
    | 'file_by_filename'
    | 'file_containing_symbol'
    | 'file_containing_extension'
    | 'all_extension_numbers_of_type'
    | 'list_services';
  file_by_filename?: string;
  file_containing_symbol?: string;
  file_containing_extension?: { containing_type: string; extension_number: number } | null;
  all_extension_numbers_of_type?: string;
  list_services?: string;
}

/** A `ServerReflectionResponse`: exactly one of the answer fields is set. */
export type ReflectionResponse = {
  valid_host: string;
  original_request: ReflectionRequest;
} & (
  | { file_descriptor_response: { file_descriptor_proto: Uint8Array[] } }
  | { all_extension_numbers_response: { base_type_name: string; extension_number: number[] } }
  | { list_services_response: { service: { name: string }[] } }
  | { error_response: { error_code: number; error_message: string } }
);

/** Options of {@link createReflectionService}. */
export interface ReflectionOptions {
  /** The descriptors to serve. */
  descriptorSet: DescriptorSet;
  /** The fully-qualified services the server offers, as `list_services` answers them. */
  serviceNames: readonly string[];
  /** When aborted, open reflection streams end with `UNAVAILABLE`. */
  shutdownSignal: AbortSignal;
}

/**
 * Creates the `ServerReflectionInfo` handler, to register under both reflection services.
 *
 * @throws DescriptorSetError when a service of `serviceNames` is not in the descriptor set.
 */
export function createReflectionService(
  options: ReflectionOptions,
): handleBidiStreamingCall<ReflectionRequest, ReflectionResponse> {
  const { descriptorSet, serviceNames, shutdownSignal } = options;
  for (const name of serviceNames) {
    if (descriptorSet.symbols.get(name)?.kind !== 'service') {
      throw new DescriptorSetError(
        `${descriptorSet.source} does not describe the service ${name}, so reflection cannot`,
      );
    }
  }

  return (call) => {
    let open = true;
    const close = (error?: GrpcError): void => {
      if (!open) return;
      open = false;
      shutdownSignal.removeEventListener('abort', onShutdown);
      if (error === undefined) call.end();
      else call.emit('error', error);
    };
    const onShutdown = (): void => close(unavailable('the server is shutting down'));

    call.on('data', (request: ReflectionRequest) => {
      if (!open) return;
      const answer = answerReflectionRequest(descriptorSet, serviceNames, request);
      if (isGrpcError(answer)) close(answer);
      else call.write(answer);
    });
    call.on('end', () => close());
    call.on('cancelled', () => {
      open = false;
      shutdownSignal.removeEventListener('abort', onShutdown);
    });
    if (shutdownSignal.aborted) onShutdown();
    else shutdownSignal.addEventListener('abort', onShutdown, { once: true });
  };
}

/**
 * Answers one reflection query. Unknown files, symbols and extensions are answered with an
 * `error_response` of `NOT_FOUND`, as the protocol asks; a request with no query set ends the
 * stream with `INVALID_ARGUMENT` (the returned error).
 */
export function answerReflectionRequest(
  descriptorSet: DescriptorSet,
  serviceNames: readonly string[],
  request: ReflectionRequest,
): ReflectionResponse | GrpcError {
  const base = { valid_host: request.host, original_request: request };
  const notFound = (message: string): ReflectionResponse => ({
    ...base,
    error_response: { error_code: status.NOT_FOUND, error_message: message },
  });
  const filesFor = (fileName: string): ReflectionResponse => ({
    ...base,
    file_descriptor_response: {
      file_descriptor_proto: fileWithDependencies(descriptorSet, fileName).map((f) => f.bytes),
    },
  });

  switch (request.message_request) {
    case 'list_services':
      return {
        ...base,
        list_services_response: { service: serviceNames.map((name) => ({ name })) },
      };
    case 'file_by_filename': {
      const fileName = request.file_by_filename ?? '';
      if (!descriptorSet.files.has(fileName)) return notFound(`file not found: ${fileName}`);
      return filesFor(fileName);
    }
    case 'file_containing_symbol': {
      const symbol = stripLeadingDot(request.file_containing_symbol ?? '');
      const found = descriptorSet.symbols.get(symbol);
      if (found === undefined) return notFound(`symbol not found: ${symbol}`);
      return filesFor(found.file);
    }
    case 'file_containing_extension': {
      const containingType = stripLeadingDot(
        request.file_containing_extension?.containing_type ?? '',
      );
      const number = request.file_containing_extension?.extension_number ?? 0;
      const fileName = descriptorSet.extensions.get(containingType)?.get(number);
      if (fileName === undefined) {
        return notFound(`extension not found: ${containingType} field ${number}`);
      }
      return filesFor(fileName);
    }
    case 'all_extension_numbers_of_type': {
      const typeName = stripLeadingDot(request.all_extension_numbers_of_type ?? '');
      if (descriptorSet.symbols.get(typeName)?.kind !== 'message') {
        return notFound(`message type not found: ${typeName}`);
      }
      const numbers = [...(descriptorSet.extensions.get(typeName)?.keys() ?? [])];
      return {
        ...base,
        all_extension_numbers_response: {
          base_type_name: typeName,
          extension_number: numbers.sort((a, b) => a - b),
        },
      };
    }
    case undefined:
      return invalidArgument('message_request', 'exactly one query must be set');
  }
}

function stripLeadingDot(name: string): string {
  return name.startsWith('.') ? name.slice(1) : name;
}
