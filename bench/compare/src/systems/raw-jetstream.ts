/**
 * The floor of a broker (issue 7): JetStream publish-with-ack of every job, then a durable pull
 * consumer that fetches, hands each message to the handler and acks it — nothing else. One file
 * stream with work-queue retention on the machine's nats-server (2.9: page cache, fsync every two
 * minutes), removed at teardown.
 */
import { randomBytes } from 'node:crypto';
import {
  AckPolicy,
  DiscardPolicy,
  jetstream,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
  type JetStreamClient,
  type JetStreamManager,
} from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { closeNats, connectNats, fetchEach } from '@sluice/bus';
import { natsUrl } from '@sluice/bus/testing';
import { CompletionLog } from '../completion-log.js';
import { forEachBounded } from '../pool.js';
import { packageVersion } from '../versions.js';
import { machineNatsServer } from './footprint-processes.js';
import type { Job, QueueSystem, StartOptions } from '../system.js';

/** Publishes awaiting their ack at once: pipelined, still one acknowledged message each. */
const PUBLISH_IN_FLIGHT = 256;
/** Messages one pull asks for. */
const FETCH_BATCH = 128;
const FETCH_EXPIRES_MS = 1_000;

export function createRawJetStream(): QueueSystem {
  const token = randomBytes(4).toString('hex');
  const stream = `BENCH_RAW_${token}`;
  const subject = `bench.raw.${token}`;
  const durable = 'workers';
  let nc: NatsConnection | undefined;
  let js: JetStreamClient | undefined;
  let jsm: JetStreamManager | undefined;
  let stopping = false;
  let workerError: Error | undefined;
  const loops: Promise<void>[] = [];
  let completed: CompletionLog | undefined;

  return {
    name: 'raw-jetstream',
    durability: 'page cache, fsync ≤ 2 min',
    batched: false,

    async setup() {
      nc = await connectNats({ url: natsUrl(), name: `bench-raw-jetstream-${token}` });
      js = jetstream(nc);
      jsm = await jetstreamManager(nc);
      await jsm.streams.add({
        name: stream,
        subjects: [subject],
        retention: RetentionPolicy.Workqueue,
        storage: StorageType.File,
        discard: DiscardPolicy.New,
        num_replicas: 1,
      });
      await jsm.consumers.add(stream, {
        durable_name: durable,
        ack_policy: AckPolicy.Explicit,
        ack_wait: 30_000_000_000,
        max_ack_pending: 10_000,
      });
    },

    async enqueue(jobs: readonly Job[]) {
      const client = js;
      if (!client) throw new Error('raw-jetstream: setup() first');
      await forEachBounded(jobs, PUBLISH_IN_FLIGHT, async (job) => {
        const ack = await client.publish(subject, job.id, { msgID: job.id });
        if (ack.duplicate) throw new Error(`raw-jetstream: ${job.id} published twice`);
      });
    },

    async startWorkers(options: StartOptions) {
      const client = js;
      if (!client) throw new Error('raw-jetstream: setup() first');
      const consumer = await client.consumers.get(stream, durable);
      // `concurrency` pull loops, each handling its batch in order: a no-op handler needs no more.
      for (let i = 0; i < options.concurrency; i += 1) {
        loops.push(
          (async () => {
            while (!stopping) {
              await fetchEach(
                consumer,
                { maxMessages: FETCH_BATCH, expiresMs: FETCH_EXPIRES_MS },
                async (message) => {
                  await options.handler({ id: message.string() });
                  message.ack();
                  // The ack is sent, not confirmed (the floor does not wait for the server).
                  completed?.record(message.string());
                },
              );
            }
          })().catch((error: unknown) => {
            // The run then misses jobs and fails; teardown reports why.
            workerError ??= error instanceof Error ? error : new Error(String(error));
          }),
        );
      }
    },

    async teardown() {
      stopping = true;
      await Promise.allSettled(loops);
      await jsm?.streams.delete(stream).catch(() => undefined);
      if (nc) await closeNats(nc);
      if (workerError !== undefined) throw workerError;
    },

    watchCompletions() {
      completed = new CompletionLog();
      return Promise.resolve(completed);
    },

    async versions() {
      return {
        'nats-server': nc?.info?.version ?? 'unknown',
        '@nats-io/jetstream': await packageVersion('@nats-io/jetstream'),
      };
    },

    processes() {
      return machineNatsServer();
    },
  };
}
