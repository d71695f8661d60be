/**
 * How `sluice.v1` messages map to JavaScript objects, for every proto-loader user (the gateway and
 * the SDK's client): `keepCase` keeps the proto field names (`task_id`; GRPC-NOTES item 1), enums
 * and 64-bit integers become strings, proto3 defaults are filled in.
 */
export const PROTO_LOADER_OPTIONS = {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
} as const;
