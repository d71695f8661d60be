/**
 * `npm start` (through scripts/start.mjs, which prepares NATS and Postgres and sets NATS_URL and
 * DATABASE_URL): runs the whole stack in the foreground — gateway (gRPC on SLUICE_GRPC_PORT, 50051
 * by default), scheduler, governor and one executor per resource class of the configured task types
 * — with their logs on stdout, one readable line each, until Ctrl-C or SIGTERM; then stops every
 * service cleanly.
 *
 *     npm start                                      # executors for what the task types need
 *     npm start -- --resource llm --resource tool:http   # or exactly these
 *
 * Every service reads its configuration from this environment (see docs/operations.md). Exits 0
 * after a clean stop; 1 when a service fails to start, dies, or does not stop cleanly; 2 when a
 * service refuses its configuration, or on an argument it does not take.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureServiceBundles } from '@sluice/service-bundles';
import { parseCommandLine } from '../lib/command-line.js';
import { paint, redactNatsUrl, redactUrl } from '../lib/terminal.js';
import { LogFormatter } from './log-format.js';
import { resourcesOfTaskModules } from './resources.js';
import { ServiceGroup, type ServiceExit, type ServiceSpec } from './service-group.js';

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
/** How long the services may take to start (migrations, NATS topology, lease). */
const READY_TIMEOUT_MS = 60_000;
/** How long a stopping service may take before it is killed. */
const STOP_GRACE_MS = 15_000;
/** The exit code services use for invalid configuration (see @sluice/runtime). */
const EXIT_CONFIG = 2;
/** What services connect to without NATS_URL / DATABASE_URL (start.mjs always sets both). */
const DEFAULT_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/sluice';
const DEFAULT_NATS_URL = 'nats://127.0.0.1:4222';

const note = (text: string) => console.log(paint('bold', text));

const { values } = parseCommandLine(
  { options: { resource: { type: 'string', multiple: true } } },
  'npm start [-- --resource <name> …]',
);
const env = process.env;
let resources: string[];
try {
  resources = values.resource?.length
    ? [...new Set(values.resource)]
    : await resourcesOfTaskModules(env['SLUICE_TASK_MODULES']);
} catch (error) {
  console.error(`start: ${error instanceof Error ? error.message : String(error)}`);
  console.error('start: name the executors to run with --resource <name> (repeatable)');
  process.exit(1);
}

const specs: ServiceSpec[] = [
  { name: 'gateway', service: 'gateway' },
  { name: 'scheduler', service: 'scheduler' },
  { name: 'governor', service: 'governor' },
  ...resources.map((resource) => ({
    name: `executor-${resource}`,
    service: 'executor',
    args: ['--resource', resource],
  })),
];

note(`starting Sluice: gateway, scheduler, governor, executors for ${resources.join(', ')}`);
console.log(
  `NATS ${redactNatsUrl(env['NATS_URL'] ?? DEFAULT_NATS_URL)} · Postgres ${redactUrl(env['DATABASE_URL'] ?? DEFAULT_DATABASE_URL)} · prefix ${env['SLUICE_PREFIX'] ?? 'sluice'}`,
);
if (resources.includes('llm') && !env['SLUICE_LLM_BASE_URL']) {
  console.log(
    paint(
      'yellow',
      'SLUICE_LLM_BASE_URL is not set: llm steps call the default http://127.0.0.1:8080/v1 and fail\n' +
        'unless an OpenAI-compatible server answers there. Set SLUICE_LLM_BASE_URL (and\n' +
        'SLUICE_LLM_API_KEY, SLUICE_LLM_MODEL) to use a real endpoint.',
    ),
  );
}

// Installed before the services start, so that no signal can leave them running without us.
/** Kills the services at once; does nothing until they exist. */
let killServices = (): void => undefined;
let stopSignal: NodeJS.Signals | undefined;
const stopRequested = new Promise<NodeJS.Signals>((resolve) => {
  const handle = (name: NodeJS.Signals) => {
    if (stopSignal !== undefined) {
      // A second signal while stopping: the user does not want to wait.
      console.error(`${name} again: killing every service`);
      killServices();
      return;
    }
    stopSignal = name;
    resolve(name);
  };
  for (const name of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(name, () => handle(name));
  // A closed stdout (`npm start | head`: EPIPE) or terminal (EIO, beside the SIGHUP) stops the stack
  // cleanly instead of crashing this process, which would leave the services to the SIGKILL of
  // its exit handler.
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code !== 'EPIPE' && error.code !== 'EIO') throw error;
      if (stopSignal === undefined) handle(error.code === 'EPIPE' ? 'SIGPIPE' : 'SIGHUP');
    });
  }
});

// The services start from bundles, built here if a source changed.
await ensureServiceBundles();
const formatter = new LogFormatter(specs.map((s) => s.name));
const services = new ServiceGroup(specs, {
  root: REPO_ROOT,
  env,
  onLine: (name, line, stream) =>
    (stream === 'stdout' ? process.stdout : process.stderr).write(
      `${formatter.format(name, line)}\n`,
    ),
});

killServices = () => services.kill();
process.exit(await supervise(services));

/** Runs until a signal or a service failure, stops everything, and returns the exit code. */
async function supervise(group: ServiceGroup): Promise<number> {
  let failure: ServiceExit | Error | undefined;
  const started = await Promise.race([
    group.ready(READY_TIMEOUT_MS).then(
      (records) => records,
      (error: Error) => error,
    ),
    stopRequested,
  ]);
  if (started instanceof Error) failure = started;
  else if (started instanceof Map) {
    printRunning(started.get('gateway') ?? {});
    const ended = await Promise.race([group.firstExit, stopRequested]);
    if (typeof ended === 'object') failure = ended;
  }

  if (failure) {
    const what =
      failure instanceof Error
        ? failure.message
        : `${failure.name} exited (${failure.signal ?? `code ${failure.code}`})`;
    console.error(paint('red', `${what}; stopping the other services`));
  } else {
    console.log(paint('bold', `${stopSignal ?? 'stop'}: stopping every service…`));
  }
  const exits = await group.stop(STOP_GRACE_MS);
  // Our SIGTERM ends a service that is still loading its code before it can catch the signal:
  // it had nothing to clean up yet, so that is a clean stop too.
  const unclean = exits.filter((e) => e.code !== 0 && e.signal !== 'SIGTERM');
  if (!failure && unclean.length === 0) {
    console.log(paint('green', 'every service stopped cleanly'));
    return 0;
  }
  if (unclean.length > 0) {
    const list = unclean.map((e) => `${e.name} (${e.signal ?? `code ${e.code}`})`).join(', ');
    console.error(paint('red', `ended: ${list}`));
  }
  // A service that refused its configuration already said why; pass its code on.
  return exits.some((e) => e.code === EXIT_CONFIG) ? EXIT_CONFIG : 1;
}

/** The banner once every service is up: where the API is and what to do next. */
function printRunning(gatewayStarted: Record<string, unknown>): void {
  const host = env['SLUICE_GRPC_HOST'] || '127.0.0.1';
  const port = gatewayStarted['grpc_port'];
  const address = `${host}:${typeof port === 'number' ? port : '?'}`;
  // tenant:create prepares its own environment: point it at the same servers when they are not
  // the defaults (e.g. private ones started for this run).
  const overrides = [
    env['DATABASE_URL'] && env['DATABASE_URL'] !== DEFAULT_DATABASE_URL
      ? `DATABASE_URL=${redactUrl(env['DATABASE_URL'])}`
      : undefined,
    env['NATS_URL'] && env['NATS_URL'] !== DEFAULT_NATS_URL
      ? `NATS_URL=${redactNatsUrl(env['NATS_URL'])}`
      : undefined,
  ].filter((o): o is string => o !== undefined);
  const tenantCommand = [...overrides, 'npm run tenant:create -- <tenant-id>'].join(' ');
  note(`\nSluice is running · gRPC API on ${address} · Ctrl-C stops every service`);
  console.log(`  create a tenant and its API key:  ${tenantCommand}`);
  console.log(`  list the API:                     grpcurl -plaintext ${address} list`);
  console.log('');
}
