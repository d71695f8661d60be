/**
 * `@sluice/bus/testing` — fixtures for tests that talk to NATS: unique name prefixes so tests never
 * share subjects, streams or buckets, the URL of the run's server, and private `nats-server`
 * processes for fault tests (crash, restart on the same store).
 *
 * @example
 * ```ts
 * await using server = await startNatsServer();
 * const nc = await connect({ servers: server.url });
 * // … publish, then: await server.restart();
 * ```
 */
export { uniquePrefix } from './unique-prefix.js';
export { natsUrl } from './nats-url.js';
export { startNatsServer } from './nats-server.js';
export type { NatsServer, StartNatsServerOptions } from './nats-server.js';
export { deletePrefixResources, deleteStaleTestResources } from './cleanup.js';
