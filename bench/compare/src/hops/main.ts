/**
 * The hop floor (issue 7, idle pickup): `npm run bench:hops [-- --count N --gap-ms MS]`
 *
 * Times each hop a task's path is made of (hops.ts) on this machine, idle and busy, then the floor
 * of Sluice's create → handler start and of the shortest durable path (paths.ts), and prints them
 * as markdown. Needs the machine's (or NATS_URL's) NATS and DATABASE_URL's Postgres, as
 * `npm run bench` does. About a minute with the defaults.
 */
import { parseArgs } from 'node:util';
import { compareMachine, finishMachine } from '../machine.js';
import { HOP_NAMES, measureHops, type HopName } from './hops.js';
import { renderHops } from './render.js';

const USAGE = `usage: npm run bench:hops -- [--count N] [--gap-ms MS] [--hops NAME,…]
  --count N     timed passes of each hop, idle and again busy (default 200)
  --gap-ms MS   pause before each idle pass (default 100, the idle-pickup scenario's gap)
  --hops NAMES  only these hops, comma-separated (default all: ${HOP_NAMES.join(', ')})
`;

/** Aborted on the first SIGINT or SIGTERM. */
const interrupted = new AbortController();

/**
 * The first signal stops the timing and closes the hop open then (its test database, its stream,
 * its connections), then the process exits non-zero without a report; a second exits at once.
 * Node's default would end the process at once, leaving the database and the stream behind.
 */
function stopOnSignals(): void {
  const onSignal = (signal: NodeJS.Signals) => {
    const code = signal === 'SIGTERM' ? 143 : 130;
    if (interrupted.signal.aborted) {
      process.stderr.write(`\n${signal} again: exiting without closing the hop\n`);
      process.exit(code);
    }
    process.exitCode = code;
    process.stderr.write(`\n${signal}: closing the hop …\n`);
    interrupted.abort(new Error(`interrupted (${signal})`));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      count: { type: 'string', default: '200' },
      'gap-ms': { type: 'string', default: '100' },
      hops: { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    process.stdout.write(USAGE);
    return;
  }
  const count = wholeNumber(values.count, '--count', 1);
  const idleGapMs = wholeNumber(values['gap-ms'], '--gap-ms', 0);
  const hops = values.hops === undefined ? undefined : hopNames(values.hops);
  stopOnSignals();
  const machine = await compareMachine();
  const figures = await measureHops({
    count,
    idleGapMs,
    ...(hops === undefined ? {} : { hops }),
    signal: interrupted.signal,
    onHop: (name) => process.stderr.write(`hops: timing ${name} (${count} idle, ${count} busy)\n`),
  });
  finishMachine(machine);
  process.stdout.write(renderHops(figures, machine, { count, idleGapMs }));
}

function hopNames(text: string): HopName[] {
  const names = text.split(',').map((name) => name.trim());
  const unknown = names.filter((name) => !(HOP_NAMES as readonly string[]).includes(name));
  if (unknown.length > 0 || names.length === 0) {
    throw new Error(`--hops takes names among ${HOP_NAMES.join(', ')}, not "${text}"`);
  }
  return names as HopName[];
}

function wholeNumber(text: string, flag: string, min: number): number {
  const value = Number(text);
  if (!Number.isInteger(value) || value < min) {
    throw new Error(`${flag} must be a whole number of at least ${min}, not "${text}"`);
  }
  return value;
}

main().catch((error: unknown) => {
  // Stopped by a signal: the hop is closed, the exit code set; no report, no usage.
  if (interrupted.signal.aborted) return;
  process.stderr.write(
    `${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n\n${USAGE}`,
  );
  process.exitCode = 2;
});
