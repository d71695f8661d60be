/**
 * `@sluice/runtime` — what every Sluice service's entry point shares: configuration from the
 * environment, the process lifecycle and loop timing.
 *
 * @example
 * ```ts
 * import { COMMON_ENV, loadEnvConfig, runService } from '@sluice/runtime';
 * runService('scheduler', async () => {
 *   const config = loadEnvConfig({ ...COMMON_ENV });
 *   const app = createScheduler(config);
 *   await app.start();
 *   return app;
 * });
 * ```
 */
export {
  COMMON_ENV,
  ConfigError,
  durationVar,
  enumVar,
  intVar,
  loadEnvConfig,
  poolSizeVar,
  prefixVar,
  stringVar,
  urlListVar,
  urlVar,
  URGENT_RESERVE_ENV,
  ADMISSION_ENV,
  configuredAdmission,
} from './config.js';
export type { EnvConfig, EnvSchema } from './config.js';
export { EXIT_CONFIG, runService } from './run-service.js';
export type { Stoppable } from './run-service.js';
export { Waker, withTimeout } from './timers.js';
export { DEFAULT_STARTUP_REPORT_MS, watchStartup } from './startup-watch.js';
export type { StartupLog, StartupWatch, StartupWatchOptions } from './startup-watch.js';
