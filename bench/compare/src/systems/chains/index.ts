/**
 * The chain adapters of the three-step scenario (issue 7, workload 4), by the `--systems` name of
 * the system they stand for. The peers' modules are imported when a run needs them, so a missing
 * peer package fails only that run. Systems without an entry (the raw floors, the batched
 * variants: chains are enqueued one at a time) are skipped by the scenario.
 */
import type { ChainSystem } from '../../chain-system.js';

/** What a chain adapter is told: the harness's settings it must know before `setup`. */
export interface ChainSettings {
  /** Steps of one kind handled at once. */
  readonly concurrency: number;
  readonly echo: boolean;
}

type ChainFactory = (settings: ChainSettings) => Promise<ChainSystem>;

const CHAIN_ADAPTERS: Readonly<Record<string, ChainFactory>> = {
  sluice: async (settings) =>
    (await import('./sluice-chain.js')).createSluiceChain({
      slots: settings.concurrency,
      echo: settings.echo,
    }),
  bullmq: async () => (await import('./bullmq-flow.js')).createBullmqFlow({ aof: false }),
  'bullmq-aof': async () => (await import('./bullmq-flow.js')).createBullmqFlow({ aof: true }),
  'pg-boss': async () => (await import('./pg-boss-chain.js')).createPgBossChain(),
  'graphile-worker': async () => (await import('./graphile-chain.js')).createGraphileChain(),
};

/** Whether the system named `key` (as `--systems` names it) has a chain adapter. */
export function hasChainAdapter(key: string): boolean {
  return Object.hasOwn(CHAIN_ADAPTERS, key);
}

/** The chain adapter of the system named `key`; throws when it has none. */
export async function createChainSystem(
  key: string,
  settings: ChainSettings,
): Promise<ChainSystem> {
  const factory = CHAIN_ADAPTERS[key];
  if (factory === undefined) throw new Error(`no chain adapter for ${key}`);
  return factory(settings);
}

/** Every system with a chain adapter. */
export const CHAIN_SYSTEM_NAMES: readonly string[] = Object.keys(CHAIN_ADAPTERS);
