/**
 * The whole Sluice stack for end-to-end tests and the demo: gateway, scheduler, governor and one
 * executor per resource, each a separate process, on a fresh database and a unique prefix.
 *
 * The credentials it passes on (the LLM key, a database password, any `*_API_KEY`, `*_SECRET`,
 * `*_TOKEN` or `*_PASSWORD` variable) are registered in test/support/secrets.ts, and stopping the
 * stack fails when any service printed one of them.
 */
import { deletePrefixResources, deleteStaleTestResources } from '@sluice/bus/testing';
import { SECRET_VARIABLE, registerSecret, registerUrlPassword } from './secrets.js';
import { ServiceProcess } from './service-process.js';
import { ensureServiceBundles } from '@sluice/service-bundles';

/** What the stack runs against. */
export interface StackOptions {
  readonly natsUrl: string;
  readonly databaseUrl: string;
  readonly prefix: string;
  /** The OpenAI-compatible endpoint the `llm` steps call. */
  readonly llmBaseUrl: string;
  readonly llmApiKey?: string;
  /** Executor resources to start (default `llm` and `tool:http`). */
  readonly resources?: readonly string[];
  /** gRPC port of the gateway (default 0: any free port). */
  readonly grpcPort?: number;
  /** Extra environment for every service (short poll intervals in tests, log level …). */
  readonly env?: Record<string, string>;
  readonly echo?: boolean;
  /** Keep the prefix's streams and buckets at stop (the demo and `npm start` use the real prefix). */
  readonly keepNatsResources?: boolean;
}

/** A running stack. */
export interface Stack {
  readonly grpcAddress: string;
  readonly gateway: ServiceProcess;
  readonly scheduler: ServiceProcess;
  readonly governor: ServiceProcess;
  readonly executors: ReadonlyMap<string, ServiceProcess>;
  readonly all: readonly ServiceProcess[];
  /**
   * Starts one more executor of `resource` (e.g. after killing one) and waits until it runs; it
   * is stopped with the stack.
   */
  startExecutor(resource: string): Promise<ServiceProcess>;
  /** Starts another scheduler (e.g. after killing one) and waits until it runs. */
  startScheduler(): Promise<ServiceProcess>;
  /**
   * Stops every process (SIGTERM) and deletes the prefix's streams and buckets; resolves with the
   * exit codes by name.
   *
   * @throws SecretLeakError (test/support/secrets.ts) when a service printed a secret, after
   *   everything is stopped and deleted.
   */
  stop(): Promise<Record<string, number | null>>;
  [Symbol.asyncDispose](): Promise<void>;
}

/** Test streams older than this are leftovers of crashed runs (no test runs that long). */
const STALE_TEST_RESOURCES_MS = 3 * 60 * 60 * 1000;

export async function startStack(options: StackOptions): Promise<Stack> {
  await deleteStaleTestResources(options.natsUrl, STALE_TEST_RESOURCES_MS);
  await ensureServiceBundles();
  const env: Record<string, string> = {
    NATS_URL: options.natsUrl,
    DATABASE_URL: options.databaseUrl,
    SLUICE_PREFIX: options.prefix,
    SLUICE_LOG_LEVEL: 'info',
    SLUICE_LLM_BASE_URL: options.llmBaseUrl,
    ...(options.llmApiKey ? { SLUICE_LLM_API_KEY: options.llmApiKey } : {}),
    ...options.env,
  };
  for (const [variable, value] of Object.entries(env)) {
    if (SECRET_VARIABLE.test(variable)) registerSecret(value, variable);
  }
  registerUrlPassword(options.databaseUrl, 'DATABASE_URL password');
  registerUrlPassword(options.natsUrl, 'NATS_URL password');
  const start = (
    name: string,
    service: string,
    extra: Record<string, string> = {},
    args: string[] = [],
  ) =>
    new ServiceProcess({
      name,
      service,
      args,
      env: { ...env, ...extra },
      echo: options.echo ?? false,
    });

  const gateway = start('gateway', 'gateway', { SLUICE_GRPC_PORT: String(options.grpcPort ?? 0) });
  const scheduler = start('scheduler', 'scheduler');
  const governor = start('governor', 'governor');
  const executors = new Map<string, ServiceProcess>();
  const startExecutorProcess = (resource: string, name = `executor-${resource}`) =>
    start(name, 'executor', {}, ['--resource', resource]);
  for (const resource of options.resources ?? ['llm', 'tool:http']) {
    executors.set(resource, startExecutorProcess(resource));
  }
  const all: ServiceProcess[] = [gateway, scheduler, governor, ...executors.values()];
  const stop = async () => {
    // Every process is stopped and the resources deleted even when one printed a secret.
    const stopped = await Promise.allSettled(all.map((p) => p.stop()));
    if (options.keepNatsResources !== true)
      await deletePrefixResources(options.natsUrl, options.prefix);
    const failures = stopped.flatMap((s) => (s.status === 'rejected' ? [s.reason as unknown] : []));
    if (failures.length === 1) throw failures[0];
    if (failures.length > 1) {
      throw new Error(failures.map((f) => (f instanceof Error ? f.message : String(f))).join('\n'));
    }
    const exits = await Promise.all(all.map((p) => p.exited));
    return Object.fromEntries(all.map((p, i) => [p.options.name, exits[i]?.code ?? null]));
  };
  try {
    const ready = await gateway.waitForMessage('gateway started', 60_000);
    await scheduler.waitForMessage('scheduler started', 60_000);
    for (const executor of executors.values())
      await executor.waitForMessage('executor started', 60_000);
    await governor.waitForMessage('governor started', 60_000);
    const port = ready['grpc_port'];
    if (typeof port !== 'number') throw new Error('the gateway did not report its grpc_port');
    return {
      grpcAddress: `127.0.0.1:${port}`,
      gateway,
      scheduler,
      governor,
      executors,
      all,
      async startScheduler() {
        const extra = start(`scheduler-${all.length}`, 'scheduler');
        all.push(extra);
        await extra.waitForMessage('scheduler started', 60_000);
        return extra;
      },
      async startExecutor(resource) {
        const extra = startExecutorProcess(resource, `executor-${resource}-${all.length}`);
        all.push(extra);
        await extra.waitForMessage('executor started', 60_000);
        return extra;
      },
      stop,
      async [Symbol.asyncDispose]() {
        await stop();
      },
    };
  } catch (error) {
    // What every service said is read before the stop adds its own lines.
    const states = describeServices(all);
    // The start's failure is the news; a leak found while cleaning up would only hide it.
    await stop().catch(() => undefined);
    if (error instanceof Error) error.message += `\n${states}`;
    throw error;
  }
}

/**
 * Each service's last lines, for a start that failed: the one that did not start says where it
 * waits (its start-up watch, @sluice/runtime), and the others may say why.
 */
function describeServices(services: readonly ServiceProcess[]): string {
  return services
    .map((service) => {
      const state = service.running ? 'running' : 'exited';
      const lines = [
        ...service.stdout.slice(-3).map((line) => `  ${line.slice(0, 400)}`),
        ...service.stderr.slice(-3).map((line) => `  ! ${line.slice(0, 400)}`),
      ];
      return [`${service.options.name} (${state}):`, ...lines].join('\n');
    })
    .join('\n');
}
