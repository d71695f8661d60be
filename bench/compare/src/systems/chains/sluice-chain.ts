/**
 * Sluice's three-step chains (issue 7, workload 4): `bench-chain` tasks (three steps on three
 * resources; sluice-chain-task-types.ts) on the whole stack as separate processes — gateway,
 * scheduler, governor and, once `startWorkers` runs, one executor per resource, each with the
 * harness's concurrency as its slots — on the machine's NATS and Postgres, a fresh database and
 * prefix per run (test/support/e2e-stack.ts). Tasks are created one `CreateTask` at a time through
 * the SDK client, concurrently, each with its chain id as the idempotency key, as the one-step
 * adapter (systems/sluice.ts) does. Each step reports its start over a loopback connection to the
 * report server here (start-reports.ts).
 */
import { fileURLToPath } from 'node:url';
import { registerTaskType } from '@sluice/db';
import { isServiceError } from '@sluice/sdk/client';
import { startE2eStack, type E2eStack } from '../../../../../test/support/e2e-stack.js';
import { manifestOf } from '../../../../../services/executor/src/task-registry.js';
import type { Chain, ChainStartOptions, ChainSystem, StepHandler } from '../../chain-system.js';
import { forEachBounded } from '../../pool.js';
import { packageVersion } from '../../versions.js';
import { CREATES_IN_FLIGHT, sluiceVersion } from '../sluice.js';
import { sluiceStackSettings } from '../sluice-settings.js';
import { REPORT_ADDRESS_VARIABLE, startReportServer, type ReportServer } from '../start-reports.js';
import { benchChain, CHAIN_RESOURCES, CHAIN_TASK_TYPE } from './sluice-chain-task-types.js';

const TASK_MODULE = fileURLToPath(new URL('./sluice-chain-task-types.ts', import.meta.url));
/**
 * gRPC codes a create is retried on (same idempotency key), as systems/sluice.ts does:
 * DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED (the gateway sheds load), UNAVAILABLE.
 */
const TRANSIENT_CODES: ReadonlySet<number> = new Set([4, 8, 14]);
/** Retries of one create before the run fails. */
const MAX_CREATE_ATTEMPTS = 50;

export interface SluiceChainOptions {
  /** Steps each executor runs at once (`SLUICE_EXECUTOR_SLOTS`); fixed at setup. */
  readonly slots: number;
  readonly echo?: boolean;
}

export function createSluiceChain(options: SluiceChainOptions): ChainSystem {
  let e2e: E2eStack | undefined;
  let reports: ReportServer | undefined;
  let onStep: StepHandler | undefined;

  const running = (): E2eStack => {
    if (!e2e) throw new Error('sluice: setup() first');
    return e2e;
  };

  return {
    name: 'sluice',
    durability: 'fsync per commit',
    batched: false,

    async setup() {
      // Keys are `<job id>/<step>` (sluice-chain-task-types.ts).
      reports = await startReportServer((key, startedAt) => {
        const slash = key.lastIndexOf('/');
        return onStep?.(key.slice(0, slash), Number(key.slice(slash + 1)), startedAt);
      });
      e2e = await startE2eStack({
        label: 'bench-chain',
        resources: [],
        echo: options.echo,
        env: {
          ...sluiceStackSettings(process.env),
          SLUICE_TASK_MODULES: TASK_MODULE,
          SLUICE_EXECUTOR_SLOTS: String(options.slots),
          [REPORT_ADDRESS_VARIABLE]: reports.address,
        },
      });
      // No executor runs yet to register the type; register it as one would have before.
      await registerTaskType(e2e.handle.db, manifestOf(benchChain));
    },

    async enqueue(chains: readonly Chain[]) {
      const { client } = running();
      await forEachBounded(chains, CREATES_IN_FLIGHT, async (chain) => {
        for (let attempt = 1; ; attempt += 1) {
          try {
            await client.createTask({
              type: CHAIN_TASK_TYPE,
              priority: 'PRIORITY_P2',
              input: { job_id: chain.id },
              idempotencyKey: chain.id,
            });
            return;
          } catch (error) {
            const code = isServiceError(error) ? Number(error.code) : undefined;
            if (code === undefined || !TRANSIENT_CODES.has(code) || attempt >= MAX_CREATE_ATTEMPTS)
              throw error;
            await new Promise((resolve) => setTimeout(resolve, 100));
          }
        }
      });
    },

    async startWorkers(start: ChainStartOptions) {
      if (start.concurrency !== options.slots) {
        throw new Error(
          `sluice: the stack was set up with ${options.slots} slots, not ${start.concurrency}`,
        );
      }
      onStep = start.onStep;
      const { stack } = running();
      // One executor per resource, as a deployment runs them. The first step's starts last, so
      // that no chain begins before the executors of its later steps run (that would time their
      // start-up as hand-off between steps).
      const [first, ...later] = CHAIN_RESOURCES;
      await Promise.all(later.map((resource) => stack.startExecutor(resource)));
      await stack.startExecutor(first);
    },

    async teardown() {
      onStep = undefined;
      try {
        await e2e?.stop();
      } finally {
        e2e = undefined;
        await reports?.close();
        reports = undefined;
      }
    },

    async versions() {
      const [row] = await running().handle.sql<
        { v: string }[]
      >`select current_setting('server_version') as v`;
      return {
        sluice: sluiceVersion(),
        postgres: row?.v ?? 'unknown',
        '@sluice/sdk': await packageVersion('@sluice/sdk'),
      };
    },
  };
}
