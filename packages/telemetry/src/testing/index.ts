/**
 * Helpers for tests of code that logs: a real logger (the same pino setup as the services'),
 * whose lines a test can read.
 */
export { createCapturingLogger, type CapturingLogger } from './capturing-logger.js';
