/**
 * What every typed client of the gateway shares: where it is, how a caller authenticates, how a
 * service's stub is built from the API's `.proto` files, and how one unary call becomes a promise.
 */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { PROTO_LOADER_OPTIONS, PROTO_ROOT } from '@sluice/api';

/** Where the gateway is and who calls. */
export interface ClientOptions {
  /** `host:port` of the gateway, e.g. `127.0.0.1:50051`. */
  readonly address: string;
  /** The API key, sent as `authorization: Bearer <key>`. */
  readonly apiKey: string;
  /** Transport security (default: plaintext, for loopback and private networks). */
  readonly credentials?: grpc.ChannelCredentials;
  /** Deadline of each unary call in milliseconds (default {@link DEFAULT_CALL_TIMEOUT_MS}). */
  readonly timeoutMs?: number;
}

/** Deadline of a unary call when the caller sets none. */
export const DEFAULT_CALL_TIMEOUT_MS = 30_000;

type UnaryMethod = (
  request: unknown,
  metadata: grpc.Metadata,
  options: grpc.CallOptions,
  callback: (error: grpc.ServiceError | null, response: unknown) => void,
) => void;

/** A grpc-js stub of a loaded service: its methods by their proto names. */
export type ServiceStub = grpc.Client & Record<string, unknown>;

/** A connected stub plus what calls on it need. */
export interface Connection {
  readonly stub: ServiceStub;
  /** Fresh call metadata carrying the API key. */
  readonly metadata: () => grpc.Metadata;
  /** Calls unary method `method` (its proto name); rejects with the grpc-js `ServiceError`. */
  readonly unary: <Res>(method: string, request: unknown) => Promise<Res>;
  readonly close: () => void;
}

const constructors = new Map<string, grpc.ServiceClientConstructor>();

/**
 * The stub constructor of service `name` (e.g. `sluice.v1.TaskService`) declared in `protoFile`
 * (relative to the API's proto root). Loaded once per process: parsing the protos is the slow
 * part of starting a client.
 */
function serviceConstructor(protoFile: string, name: string): grpc.ServiceClientConstructor {
  const cached = constructors.get(name);
  if (cached) return cached;
  const definition = protoLoader.loadSync(protoFile, {
    ...PROTO_LOADER_OPTIONS,
    includeDirs: [PROTO_ROOT],
  });
  let found: unknown = grpc.loadPackageDefinition(definition);
  for (const part of name.split('.'))
    found = (found as Record<string, unknown> | undefined)?.[part];
  if (typeof found !== 'function') throw new Error(`${protoFile} does not declare ${name}`);
  const constructor = found as grpc.ServiceClientConstructor;
  constructors.set(name, constructor);
  return constructor;
}

/**
 * Opens a (lazily connecting) channel to service `name` of `protoFile` with the caller's options.
 *
 * @throws Error when the proto file does not declare the service.
 */
export function connect(protoFile: string, name: string, options: ClientOptions): Connection {
  const Service = serviceConstructor(protoFile, name);
  const stub = new Service(
    options.address,
    options.credentials ?? grpc.credentials.createInsecure(),
  ) as ServiceStub;
  const timeoutMs = options.timeoutMs ?? DEFAULT_CALL_TIMEOUT_MS;
  const metadata = () => {
    const md = new grpc.Metadata();
    md.set('authorization', `Bearer ${options.apiKey}`);
    return md;
  };
  return {
    stub,
    metadata,
    unary: <Res>(method: string, request: unknown) =>
      new Promise<Res>((resolve, reject) => {
        const call = stub[method];
        if (typeof call !== 'function') {
          reject(new Error(`${name} has no method ${method}`));
          return;
        }
        (call as UnaryMethod).call(
          stub,
          request,
          metadata(),
          { deadline: Date.now() + timeoutMs },
          (error, response) => (error ? reject(error) : resolve(response as Res)),
        );
      }),
    close: () => stub.close(),
  };
}

/**
 * Whether `error` is how grpc-js reports a call the server (or the channel) refused: an `Error`
 * with a numeric gRPC status `code` and the status message in `details`.
 */
export function isServiceError(error: unknown): error is grpc.ServiceError {
  return (
    error instanceof Error &&
    typeof (error as Partial<grpc.ServiceError>).code === 'number' &&
    typeof (error as Partial<grpc.ServiceError>).details === 'string'
  );
}
