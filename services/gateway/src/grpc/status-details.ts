/**
 * The gRPC "richer error model": a `google.rpc.Status` carried, serialized, in the
 * `grpc-status-details-bin` trailer, whose `details` hold typed messages such as
 * `google.rpc.RetryInfo`. Clients in every language read it (`status.FromError(err).Details()`
 * in Go, `rpc_status.from_call` in Python).
 *
 * The few messages needed are declared here with protobufjs reflection, using the standard
 * packages, names and field numbers of `google/rpc/status.proto` and `error_details.proto`.
 * They stay out of `proto/`: no RPC of ours references them, so they are not part of the API
 * that reflection describes, and the protocol fixes them anyway.
 */
import protobuf from 'protobufjs';

/** The trailer that carries the serialized `google.rpc.Status`. */
export const STATUS_DETAILS_TRAILER = 'grpc-status-details-bin';

/** One invalid field of a request (`google.rpc.BadRequest.FieldViolation`). */
export interface FieldViolation {
  /** Path of the field, e.g. `input` or `priority`. */
  field: string;
  /** What is wrong with it. */
  description: string;
}

/** The typed details Sluice sends; each is optional. */
export interface StatusDetails {
  /** How long the client should wait before retrying (`google.rpc.RetryInfo`), in ms. */
  retryDelayMs?: number;
  /** Invalid request fields (`google.rpc.BadRequest`). */
  fieldViolations?: FieldViolation[];
}

/** A decoded `google.rpc.Status`. */
export interface RichStatus extends StatusDetails {
  code: number;
  message: string;
}

const TYPE_URL_PREFIX = 'type.googleapis.com/';

const root = protobuf.Root.fromJSON({
  nested: {
    google: {
      nested: {
        protobuf: {
          nested: {
            Any: {
              fields: { type_url: { type: 'string', id: 1 }, value: { type: 'bytes', id: 2 } },
            },
            Duration: {
              fields: { seconds: { type: 'int64', id: 1 }, nanos: { type: 'int32', id: 2 } },
            },
          },
        },
        rpc: {
          nested: {
            Status: {
              fields: {
                code: { type: 'int32', id: 1 },
                message: { type: 'string', id: 2 },
                details: { rule: 'repeated', type: 'google.protobuf.Any', id: 3 },
              },
            },
            RetryInfo: {
              fields: { retry_delay: { type: 'google.protobuf.Duration', id: 1 } },
            },
            BadRequest: {
              fields: { field_violations: { rule: 'repeated', type: 'FieldViolation', id: 1 } },
              nested: {
                FieldViolation: {
                  fields: {
                    field: { type: 'string', id: 1 },
                    description: { type: 'string', id: 2 },
                  },
                },
              },
            },
          },
        },
      },
    },
  },
});

const StatusType = root.lookupType('google.rpc.Status');
const RetryInfoType = root.lookupType('google.rpc.RetryInfo');
const BadRequestType = root.lookupType('google.rpc.BadRequest');

const MS_PER_SECOND = 1000;
const NANOS_PER_MS = 1_000_000;

/** Serializes a `google.rpc.Status` with the given details, for {@link STATUS_DETAILS_TRAILER}. */
export function encodeStatusDetails(code: number, message: string, details: StatusDetails): Buffer {
  const anys: { type_url: string; value: Uint8Array }[] = [];
  if (details.retryDelayMs !== undefined) {
    const ms = Math.max(0, Math.round(details.retryDelayMs));
    const seconds = Math.floor(ms / MS_PER_SECOND);
    const retryDelay = { seconds, nanos: (ms - seconds * MS_PER_SECOND) * NANOS_PER_MS };
    anys.push(pack(RetryInfoType, { retry_delay: retryDelay }));
  }
  if (details.fieldViolations !== undefined && details.fieldViolations.length > 0) {
    anys.push(pack(BadRequestType, { field_violations: details.fieldViolations }));
  }
  return Buffer.from(StatusType.encode({ code, message, details: anys }).finish());
}

/**
 * Decodes a serialized `google.rpc.Status`, keeping the details Sluice knows and skipping others.
 *
 * @throws Error when the bytes are not a `google.rpc.Status`.
 */
export function decodeStatusDetails(bytes: Uint8Array): RichStatus {
  const status = StatusType.toObject(StatusType.decode(bytes), {
    longs: Number,
    defaults: true,
    arrays: true,
  }) as { code: number; message: string; details: { type_url: string; value: Uint8Array }[] };
  const result: RichStatus = { code: status.code, message: status.message };
  for (const any of status.details) {
    if (any.type_url === typeUrl(RetryInfoType)) {
      const info = RetryInfoType.toObject(RetryInfoType.decode(any.value), {
        longs: Number,
        defaults: true,
      }) as { retry_delay: { seconds: number; nanos: number } | null };
      const delay = info.retry_delay ?? { seconds: 0, nanos: 0 };
      result.retryDelayMs = delay.seconds * MS_PER_SECOND + Math.floor(delay.nanos / NANOS_PER_MS);
    } else if (any.type_url === typeUrl(BadRequestType)) {
      const badRequest = BadRequestType.toObject(BadRequestType.decode(any.value), {
        defaults: true,
        arrays: true,
      }) as { field_violations: FieldViolation[] };
      result.fieldViolations = badRequest.field_violations.map(({ field, description }) => ({
        field,
        description,
      }));
    }
  }
  return result;
}

function pack(type: protobuf.Type, value: object): { type_url: string; value: Uint8Array } {
  return { type_url: typeUrl(type), value: type.encode(value).finish() };
}

function typeUrl(type: protobuf.Type): string {
  return TYPE_URL_PREFIX + type.fullName.replace(/^\./, '');
}
