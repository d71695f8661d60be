/**
 * Preloaded into each Sluice service of a bench stack (`NODE_OPTIONS=--import=…`, live-heap.ts):
 * on SIGUSR2 the process runs a full garbage collection and writes one line to stderr with what it
 * holds then. Resident memory alone cannot tell a process that keeps something per task from one
 * whose heap V8 has not collected yet: under load V8 grows the heap and collects it later, so a
 * service's resident memory right after a burst is mostly garbage. Plain JavaScript, because the
 * services run from bundles under plain `node`, and nothing happens until the signal comes.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/** The start of the line; live-heap.ts looks for it. */
const MARKER = 'sluice-bench live heap ';

// `gc` is exposed to contexts made after the flag is set; the service's own global stays as it was.
setFlagsFromString('--expose-gc');
const collectGarbage = runInNewContext('gc');

process.on('SIGUSR2', () => {
  // Twice: objects that the first collection finds unreachable only through finalizers or weak
  // references are freed by the second.
  collectGarbage();
  collectGarbage();
  const usage = process.memoryUsage();
  process.stderr.write(
    `${MARKER}${JSON.stringify({
      heapUsedBytes: usage.heapUsed,
      heapTotalBytes: usage.heapTotal,
      rssBytes: usage.rss,
      externalBytes: usage.external,
    })}\n`,
  );
});
