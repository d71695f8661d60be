import { Writable } from 'node:stream';
import { createLogger, type Logger, type LogLevel } from '../logger.js';

/** A logger and the JSON lines it wrote, oldest first. */
export interface CapturingLogger {
  readonly log: Logger;
  /** The lines written so far; a test may empty it (`lines.length = 0`). */
  readonly lines: string[];
}

/** A logger of `service` at `level` that keeps its lines in memory instead of writing them out. */
export function createCapturingLogger(service: string, level: LogLevel = 'info'): CapturingLogger {
  const lines: string[] = [];
  const log = createLogger({
    service,
    level,
    destination: new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(chunk.toString());
        done();
      },
    }),
  });
  return { log, lines };
}
