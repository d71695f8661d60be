/**
 * Where the API's `.proto` sources are, for clients that load them directly.
 */
import { fileURLToPath } from 'node:url';

/** The `proto/` folder of the repository (the include root of `sluice/v1/*.proto`). */
export const PROTO_ROOT = fileURLToPath(new URL('../../../proto', import.meta.url));

/** The file that declares `sluice.v1.TaskService`, relative to {@link PROTO_ROOT}. */
export const TASK_SERVICE_PROTO = 'sluice/v1/task_service.proto';
