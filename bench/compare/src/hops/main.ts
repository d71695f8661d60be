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
import { measureHops } from './hops.js';
import { renderHops } from './render.js';

const USAGE = `usage: npm run bench:hops -- [--count N] [--gap-ms MS]
  --count N     timed passes of each hop, idle and again busy (default 200)
  --gap-ms MS   pause before each idle pass (default 100, the idle-pickup scenario's gap)
`;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      count: { type: 'string', default: '200' },
      'gap-ms': { type: 'string', default: '100' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    process.stdout.write(USAGE);
    return;
  }
  const count = wholeNumber(values.count, '--count', 1);
  const idleGapMs = wholeNumber(values['gap-ms'], '--gap-ms', 0);
  const machine = await compareMachine();
  const figures = await measureHops({
    count,
    idleGapMs,
    onHop: (name) => process.stderr.write(`hops: timing ${name} (${count} idle, ${count} busy)\n`),
  });
  finishMachine(machine);
  process.stdout.write(renderHops(figures, machine, { count, idleGapMs }));
}

function wholeNumber(text: string, flag: string, min: number): number {
  const value = Number(text);
  if (!Number.isInteger(value) || value < min) {
    throw new Error(`${flag} must be a whole number of at least ${min}, not "${text}"`);
  }
  return value;
}

main().catch((error: unknown) => {
  process.stderr.write(
    `${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n\n${USAGE}`,
  );
  process.exitCode = 2;
});
