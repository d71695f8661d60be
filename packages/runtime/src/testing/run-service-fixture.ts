/**
 * A service for run-service.test.ts: its start takes `FIXTURE_START_MS`, it says on stdout when it
 * started and when it stopped, and its stop takes 100 ms, as a real service's drain does.
 */
import { runService } from '../run-service.js';

const startMs = Number(process.env['FIXTURE_START_MS'] ?? '0');
process.stdout.write('starting\n');
runService('fixture', async () => {
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
