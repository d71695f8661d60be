/**
 * Reads raced against the creation of streams on a private nats-server, round after round: how the
 * bus's tests show that a reader cannot crash nats-server 2.9.10, which panics when a
 * `STREAM.MSG.GET` reaches a stream between its listing and its store (docs/decisions.md,
 * "Readers of the governor's bucket").
 */
import type { NatsConnection } from '@nats-io/transport-node';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { createBusCatalog, type BusCatalog } from '../catalog.js';
import { startNatsServer } from './nats-server.js';

export interface CreationRaceOptions {
  readonly rounds: number;
  /** Creates the round's streams from one connection; returns their names, deleted after. */
  create(nc: NatsConnection, catalog: BusCatalog): Promise<readonly string[]>;
  /** One read, repeated by each of three other connections while `create` runs. */
  read(nc: NatsConnection, catalog: BusCatalog): Promise<unknown>;
  /** A read's failure that is expected (the stream does not exist yet, say). */
  isExpectedFailure(error: unknown): boolean;
}

export interface CreationRaceResult {
  /** The server's death reports; empty when it survived every round. */
  readonly crashes: readonly string[];
  /** Read failures neither expected nor a timeout. */
  readonly unexpected: readonly unknown[];
}

/**
 * Runs the race; stops early when the server dies. A read that times out is not unexpected: a
 * direct get that meets a stream's creation window waits out its timeout (slow, never a crash).
 */
export async function raceReadsWithCreation(
  options: CreationRaceOptions,
): Promise<CreationRaceResult> {
  const crashes: string[] = [];
  const unexpected: unknown[] = [];
  await using server = await startNatsServer({ onUnexpectedExit: (r) => crashes.push(r) });
  const creator = await connect({ servers: server.url });
  const readers = await Promise.all([1, 2, 3].map(() => connect({ servers: server.url })));
  try {
    const jsm = await jetstreamManager(creator);
    for (let round = 0; round < options.rounds && crashes.length === 0; round++) {
      const catalog = createBusCatalog(`race${String(round)}`);
      let creating = true;
      const reading = readers.map(async (nc) => {
        while (creating) {
          try {
            await options.read(nc, catalog);
          } catch (error) {
            const timedOut = error instanceof Error && error.name === 'TimeoutError';
            if (!options.isExpectedFailure(error) && !timedOut) unexpected.push(error);
          }
        }
      });
      let created: readonly string[];
      try {
        created = await options.create(creator, catalog);
      } catch (error) {
        if (crashes.length === 0) throw error; // Else the server's death says more.
        break;
      } finally {
        creating = false;
        await Promise.all(reading);
      }
      for (const stream of created) await jsm.streams.delete(stream);
    }
  } finally {
    await Promise.all([creator, ...readers].map((nc) => nc.close()));
  }
  return { crashes, unexpected };
}
