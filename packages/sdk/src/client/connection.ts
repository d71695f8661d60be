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
  /**
   * How long a connection with a call open (a watch waiting for the next event) may stay silent
   * before the client pings the gateway, in milliseconds (default
   * {@link DEFAULT_KEEPALIVE_TIME_MS}). A server that limits pings (gRPC C-core and Go servers,
   * and proxies built on them, allow one in 5 minutes by default and close the connection with
   * `too_many_pings` otherwise) needs this at least as long as its limit; the gateway sets none.
   */
  readonly keepaliveTimeMs?: number;
  /**
   * How long a ping may go unanswered before the connection is taken for dead and its calls fail
   * with `UNAVAILABLE`, in milliseconds (default {@link DEFAULT_KEEPALIVE_TIMEOUT_MS}).
   */
  readonly keepaliveTimeoutMs?: number;
}

/** Deadline of a unary call when the caller sets none. */
export const DEFAULT_CALL_TIMEOUT_MS = 30_000;

/**
 * Keepalive of a connection while a call is open, when the caller sets none. A watch has no
 * deadline: without pings, one whose connection died silently (the gateway's host gone, a NAT or
 * proxy that dropped the connection's state) waited for its next event for good. The gateway
 * pings too (every 60 s), but a client never hears of a gateway that can no longer reach it.
 */
export const DEFAULT_KEEPALIVE_TIME_MS = 60_000;
export const DEFAULT_KEEPALIVE_TIMEOUT_MS = 20_000;

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
    {
      // Pings only while a call is open (grpc.keepalive_permit_without_calls unset): an idle
      // client sends nothing.
      'grpc.keepalive_time_ms': options.keepaliveTimeMs ?? DEFAULT_KEEPALIVE_TIME_MS,
      'grpc.keepalive_timeout_ms': options.keepaliveTimeoutMs ?? DEFAULT_KEEPALIVE_TIMEOUT_MS,
    },
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
