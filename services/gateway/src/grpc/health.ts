/**
 * The standard `grpc.health.v1.Health` service (grpc-health-check's implementation), reporting
 * one status for the whole server (service name `''`) and the same for each named service.
 */
import { HealthImplementation } from 'grpc-health-check';
import type { Server } from '@grpc/grpc-js';

/** The fully-qualified name of the health service. */
export const HEALTH_SERVICE_NAME = 'grpc.health.v1.Health';

/** The health service of one gRPC server. */
export interface HealthService {
  /** Registers `grpc.health.v1.Health` on `server`. Call once, before the server starts. */
  addToServer(server: Server): void;
  /**
   * Reports `SERVING` or `NOT_SERVING` for the server (`''`) and every named service; `Check`
   * answers it and `Watch` streams push it.
   */
  setServing(serving: boolean): void;
}

/**
 * Creates the health service, `NOT_SERVING` until {@link HealthService.setServing} says otherwise.
 *
 * @param serviceNames - Fully-qualified services to report besides the server as a whole, e.g.
 *   `sluice.v1.TaskService`.
 */
export function createHealthService(serviceNames: readonly string[]): HealthService {
  const names = ['', ...serviceNames];
  const implementation = new HealthImplementation(
    Object.fromEntries(names.map((name) => [name, 'NOT_SERVING' as const])),
  );
  return {
    addToServer(server) {
      implementation.addToServer(server);
    },
    setServing(serving) {
      for (const name of names) implementation.setStatus(name, serving ? 'SERVING' : 'NOT_SERVING');
    },
  };
}
