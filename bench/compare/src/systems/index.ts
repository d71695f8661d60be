/**
 * Every system the harness can run, by name. The raw floors and Sluice are imported here; the
 * peers' adapters (BullMQ, pg-boss, Graphile Worker, written apart in `systems/bullmq.ts`,
 * `pg-boss.ts`, `graphile.ts`) are imported at run time, so that a peer whose module or packages
 * are missing leaves the others runnable (it is reported on stderr). Each variant is listed by the
 * `name` its adapter reports.
 */
import type { QueueSystem, SystemInfo } from '../system.js';
import { createRawJetStream } from './raw-jetstream.js';
import { createRawPostgres } from './raw-postgres.js';
import { createSluice } from './sluice.js';

/** What a factory is told: the harness's settings that a system must know before `setup`. */
export interface SystemSettings {
  /** Jobs handled at once (what `startWorkers` will be given). */
  readonly concurrency: number;
  /** Print the output of the system's own processes, when it has any. */
  readonly echo: boolean;
}

export type SystemFactory = (settings: SystemSettings) => QueueSystem;

const OWN: Record<string, SystemFactory> = {
  'raw-jetstream': () => createRawJetStream(),
  'raw-postgres': () => createRawPostgres({ batched: false }),
  'raw-postgres-batched': () => createRawPostgres({ batched: true }),
  sluice: (settings) =>
    createSluice({ batched: false, slots: settings.concurrency, echo: settings.echo }),
  'sluice-batched': (settings) =>
    createSluice({ batched: true, slots: settings.concurrency, echo: settings.echo }),
};

type Variants = (settings: SystemSettings) => QueueSystem[];

/** The peers' modules and the variants each offers (one-at-a-time and batched, AOF for BullMQ). */
const PEERS: ReadonlyArray<
  [file: string, variants: (module: Record<string, unknown>) => Variants]
> = [
  [
    './bullmq.js',
    (m) => () =>
      [false, true].flatMap((aof) =>
        [false, true].map((batched) => call(m, 'createBullmq', { aof, batched })),
      ),
  ],
  [
    './pg-boss.js',
    (m) => () => [false, true].map((batched) => call(m, 'createPgBoss', { batched })),
  ],
  [
    './graphile.js',
    (m) => () => [false, true].map((batched) => call(m, 'createGraphileWorker', { batched })),
  ],
];

function call(module: Record<string, unknown>, name: string, options: object): QueueSystem {
  const factory = module[name];
  if (typeof factory !== 'function') throw new Error(`the module exports no ${name}`);
  return (factory as (o: object) => QueueSystem)(options);
}

/** How `--systems` names a system: its name, with `-batched` for the batched variant. */
export function systemKey(system: SystemInfo): string {
  return system.batched ? `${system.name}-batched` : system.name;
}

/** The own systems and every peer's variants that load, in a stable order. */
export async function loadSystems(): Promise<ReadonlyMap<string, SystemFactory>> {
  const systems = new Map<string, SystemFactory>(Object.entries(OWN));
  for (const [file, variantsOf] of PEERS) {
    try {
      const module = (await import(file)) as Record<string, unknown>;
      const variants = variantsOf(module);
      // Adapters do no I/O before `setup`: one instance of each tells its name.
      variants({ concurrency: 1, echo: false }).forEach((probe, i) => {
        const key = systemKey(probe);
        if (systems.has(key)) throw new Error(`system ${key} is defined twice`);
        systems.set(key, (settings) => variants(settings)[i]!);
      });
    } catch (error) {
      process.stderr.write(
        `bench: peer adapter ${file} not available (${error instanceof Error ? error.message : String(error)})\n`,
      );
    }
  }
  return systems;
}

/** The systems that need nothing but the machine's NATS and Postgres. */
export const OWN_SYSTEMS: readonly string[] = Object.keys(OWN);
