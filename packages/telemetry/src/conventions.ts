/**
 * The OpenTelemetry semantic-convention attribute names Sluice's RPC and messaging spans use.
 *
 * They are still "incubating" in `@opentelemetry/semantic-conventions`, whose authors advise copying
 * such names rather than importing them from the unstable entry point; copied here, once.
 */

/** `grpc` on RPC spans. */
export const ATTR_RPC_SYSTEM = 'rpc.system';
/** The full gRPC service name, e.g. `sluice.v1.TaskService`. */
export const ATTR_RPC_SERVICE = 'rpc.service';
/** The method name, e.g. `CreateTask`. */
export const ATTR_RPC_METHOD = 'rpc.method';
/** The numeric gRPC status code the call ended with (0 is OK). */
export const ATTR_RPC_GRPC_STATUS_CODE = 'rpc.grpc.status_code';

/** `nats` on messaging spans. */
export const ATTR_MESSAGING_SYSTEM = 'messaging.system';
/** The subject a message is published to. */
export const ATTR_MESSAGING_DESTINATION_NAME = 'messaging.destination.name';
/** `send` for a publish (`create`, `receive`, `process`, `settle` for the others). */
export const ATTR_MESSAGING_OPERATION_TYPE = 'messaging.operation.type';
/** The system's own name of the operation, e.g. `publish`. */
export const ATTR_MESSAGING_OPERATION_NAME = 'messaging.operation.name';
/** The message id, e.g. the JetStream `Nats-Msg-Id` used for deduplication. */
export const ATTR_MESSAGING_MESSAGE_ID = 'messaging.message.id';

/** The class of an error (stable): for Sluice, the step error class, e.g. `transient`. */
export const ATTR_ERROR_TYPE = 'error.type';
