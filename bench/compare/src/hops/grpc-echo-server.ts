/**
 * A grpc-js server answering one unary method with its request, in a process of its own (forked by
 * hops.ts): the transport of Sluice's API with nothing behind it. Tells its parent the port it
 * bound, then serves until killed.
 */
import { Server, ServerCredentials } from '@grpc/grpc-js';
import { ECHO_SERVICE } from './grpc-echo.js';

const server = new Server();
server.addService(ECHO_SERVICE, {
  echo: (call: { request: Buffer }, callback: (error: null, response: Buffer) => void) =>
    callback(null, call.request),
});
server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (error, port) => {
  if (error) throw error;
  process.send?.({ port });
});
