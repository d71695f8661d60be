/**
 * A service for run-service.test.ts: its start takes `FIXTURE_START_MS`, it says on stdout when it
 * started and when it stopped, and its stop takes 100 ms, as a real service's drain does.
 */
import { runService } from '../run-service.js';

const startMs = Number(process.env['FIXTURE_START_MS'] ?? '0');
runService('fixture', async () => {
  // Said from within the start, once runService listens for the signals: said before it (a pipe's
  // write is synchronous), a signal sent on it could arrive first and kill the process by Node's
  // default action, as a loaded CI machine once showed (exit by SIGTERM, no clean stop).
  process.stdout.write('starting\n');
  await new Promise((resolve) => setTimeout(resolve, startMs));
  process.stdout.write('started\n');
  const alive = setInterval(() => undefined, 1_000);
  return {
    async stop() {
      clearInterval(alive);
      await new Promise((resolve) => setTimeout(resolve, 100));
      process.stdout.write('stopped\n');
    },
  };
});
