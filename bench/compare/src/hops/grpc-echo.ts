/**
 * The echo method of the gRPC hop: raw bytes in and out (no protobuf), so the figure is grpc-js's
 * transport alone — HTTP/2 framing, its call machinery and two processes waking.
 */
import type { ServiceDefinition } from '@grpc/grpc-js';

const identity = (bytes: Buffer): Buffer => bytes;

export const ECHO_SERVICE: ServiceDefinition = {
  echo: {
    path: '/sluice.bench.Echo/Echo',
    requestStream: false,
    responseStream: false,
    requestSerialize: identity,
    requestDeserialize: identity,
    responseSerialize: identity,
    responseDeserialize: identity,
  },
};
