/**
 * The dispatcher's pass against real Postgres and JetStream: what it claims and publishes, and what
 * it tells about the resources it found full (which spares later passes; see full-resources.ts).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { closeNats, connectNats, createBusCatalog, ensureTopology } from '@sluice/bus';
import { deletePrefixResources, natsUrl, uniquePrefix } from '@sluice/bus/testing';
import {
  createTask,
  createTenant,
  KeptConnection,
  migrateDatabase,
  openDatabase,
  registerTaskType,
  setResourceLimit,
  type TaskTypeManifest,
} from '@sluice/db';
import { createTestDatabase, migratedTemplate } from '@sluice/db/testing';
import { createLogger, createMetrics } from '@sluice/telemetry';
import { dispatchBatch } from './dispatcher.js';
import type { PublishedDispatch } from './publication-recorder.js';

const manifest: TaskTypeManifest = {
  name: 'dispatch-test',
  version: 1,
  description: '',
  inputSchema: { type: 'object' },
  firstStep: 'work',
  steps: [{ name: 'work', resource: 'tool:narrow', timeoutMs: 1_000, maxAttempts: 1 }],
};
const log = createLogger({ service: 'dispatcher-test', level: 'silent' });

describe('dispatcher', () => {
  for (const claimsOn of ['a transaction of the pool', 'a kept connection'] as const) {
    it(`tells what it found full or left behind, and hands its publications to the sink (claims on ${claimsOn})`, async () => {
      const database = await createTestDatabase({
        template: await migratedTemplate(migrateDatabase),
      });
      const handle = openDatabase(database.url, { max: 4 });
      const claimConnection =
        claimsOn === 'a kept connection' ? new KeptConnection(handle.db) : undefined;
      const prefix = uniquePrefix('dispatcher');
      const nc = await connectNats({ url: natsUrl(), name: 'dispatcher-test' });
      try {
        const catalog = createBusCatalog(prefix);
        await ensureTopology(await jetstreamManager(nc), catalog);
        await createTenant(handle.db, { id: 'acme' });
        await registerTaskType(handle.db, manifest);
        await setResourceLimit(handle.db, 'tool:narrow', 1);
        for (let i = 0; i < 2; i++) {
          await createTask(handle.db, {
            tenantId: 'acme',
            taskType: manifest,
            priority: 2,
            input: {},
          });
        }
        const recorded: PublishedDispatch[] = [];
        const pass = () =>
          dispatchBatch({
            db: handle.db,
            js: jetstream(nc),
            catalog,
            log,
            metrics: createMetrics(),
            batchSize: 10,
            claimConnection,
            publications: { record: (published) => void recorded.push(...published) },
          });
        assert.deepEqual(
          await pass(),
          { more: false, claimed: 1, full: [], leftBehind: true, urgentResources: [] },
          'the first pass found a slot (and took it), the other step found none',
        );
        assert.deepEqual(
          await pass(),
          {
            more: false,
            claimed: 0,
            full: ['tool:narrow'],
            leftBehind: false,
            urgentResources: [],
          },
          'one in flight, limit one, one waiting: for a slot of a full resource',
        );
        const stream = await (await jetstreamManager(nc)).streams.info(catalog.streams.steps);
        assert.equal(stream.state.messages, 1, 'one step published, the other left ready');
        assert.deepEqual(
          recorded.map((p) => p.publishSeq),
          [stream.state.last_seq],
          'its stream sequence went to the publication sink',
        );
        const [step] = await handle.sql<{ publish_seq: string | null }[]>`
        select publish_seq from task_steps where status = 'dispatched'`;
        assert.equal(step?.publish_seq, null, 'and only there: the sink writes it later');
      } finally {
        await closeNats(nc);
        await deletePrefixResources(natsUrl(), prefix);
        await claimConnection?.close();
        await handle.close();
        await database.drop();
      }
    });
  }
});
