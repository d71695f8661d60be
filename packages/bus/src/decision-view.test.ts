import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { createBusCatalog } from './catalog.js';
import { startDecisionView, UNGOVERNED, type DecisionView } from './decision-view.js';
import {
  DECISIONS_KEY,
  encodeDecision,
  normalDecision,
  type GovernorDecision,
} from './governor-decision.js';
import { deletePrefixResources, natsUrl, uniquePrefix } from './testing/index.js';
import { openGovernorBucket } from './governor-bucket.js';
import { openKvBuckets } from './topology.js';

const quiet = { warn: () => undefined, info: () => undefined };

/** A log that keeps the messages of its warnings and infos. */
function recordingLog() {
  const warnings: string[] = [];
  const infos: string[] = [];
  return {
    warnings,
    infos,
    log: {
      warn: (_fields: Record<string, unknown>, message: string) => void warnings.push(message),
      info: (_fields: Record<string, unknown>, message: string) => void infos.push(message),
    },
  };
}

let nc: NatsConnection;
/** The prefix of the test that opens the KV buckets (removed from the shared server after). */
const viewPrefix = uniquePrefix('view');
before(async () => {
  nc = await connect({ servers: natsUrl() });
});
after(async () => {
  await nc.drain();
  await deletePrefixResources(natsUrl(), viewPrefix);
});

function publish(subject: string, decision: GovernorDecision): void {
  nc.publish(subject, encodeDecision(decision));
}

/** Waits until `probe` holds (messages reach the view asynchronously). */
async function until(what: string, probe: () => boolean): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!probe()) {
    assert.ok(Date.now() < deadline, `timed out waiting until ${what}`);
    await new Promise((resolve) => setImmediate(resolve));
  }
}

describe('startDecisionView', () => {
  it('starts from the stored decision, follows newer ones and ignores older epochs', async () => {
    const catalog = createBusCatalog(viewPrefix);
    const { governor } = await openKvBuckets(nc, catalog, { leaseTtlMs: 5_000 });
    const subject = catalog.subjects.governorDecisions;
    const stored = { ...normalDecision(5, 'g5'), holds: [3] as const };
    await governor.put(DECISIONS_KEY, encodeDecision(stored));
    const changes: GovernorDecision[] = [];
    let view: DecisionView | undefined;
    try {
      view = await startDecisionView({
        nc,
        kv: governor,
        subject,
        log: quiet,
        onChange: (d) => changes.push(d),
      });
      assert.deepEqual(view.current().holds, [3], 'the stored decision applies at once');
      // In order on one subject: an older epoch, a re-publication, then a newer decision. Once the
      // newer one is seen, the two before it were handled.
      publish(subject, { ...normalDecision(4, 'old'), reject: [3] });
      publish(subject, { ...normalDecision(5, 'g5'), holds: [3] });
      publish(subject, { ...normalDecision(6, 'g6'), holds: [2, 3] });
      const current = view;
      await until('the newer decision is seen', () => current.current().epoch === 6);
      assert.deepEqual(current.current().holds, [2, 3]);
      assert.deepEqual(
        changes.map((d) => d.epoch),
        [5, 6],
        'the older epoch was ignored, the re-publication was no change',
      );
    } finally {
      view?.stop();
      await governor.destroy();
    }
  });

  it('answers ungoverned once the decision is stale, and obeys again when a fresh one comes', async () => {
    const subject = createBusCatalog(uniquePrefix('stale')).subjects.governorDecisions;
    let nowMs = Date.parse('2026-01-01T00:00:00Z');
    const view = await startDecisionView({
      nc,
      subject,
      log: quiet,
      staleAfterMs: 1_000,
      now: () => nowMs,
    });
    try {
      assert.equal(view.current(), UNGOVERNED, 'nothing seen yet: ungoverned');
      publish(subject, { ...normalDecision(1, 'g', new Date(nowMs)), holds: [3] });
      await until('the decision is seen', () => view.current().holds.length === 1);
      nowMs += 1_001;
      assert.equal(view.isStale(), true);
      assert.equal(view.current(), UNGOVERNED, 'a dead governor holds nothing back');
      publish(subject, { ...normalDecision(1, 'g', new Date(nowMs)), holds: [2, 3] });
      await until('the fresh decision is obeyed', () => view.current().holds.length === 2);
    } finally {
      view.stop();
    }
  });
  it('waits for a governor that has not created its bucket yet without a warning', async () => {
    const catalog = createBusCatalog(uniquePrefix('nobucket'));
    const lines = recordingLog();
    const view = await startDecisionView({
      nc,
      kv: openGovernorBucket(nc, catalog),
      subject: catalog.subjects.governorDecisions,
      log: lines.log,
    });
    try {
      assert.deepEqual(lines.warnings, []);
      assert.deepEqual(lines.infos, ['no governor has published a decision yet; waiting for one']);
      assert.equal(view.current(), UNGOVERNED);
      publish(catalog.subjects.governorDecisions, {
        ...normalDecision(1, 'g', new Date()),
        holds: [3],
      });
      await until('the first decision is obeyed', () => view.current().holds.length === 1);
    } finally {
      view.stop();
    }
  });

  it('warns when the stored decision cannot be read for another reason', async () => {
    // A real failure: the bucket's connection is closed before the read.
    const catalog = createBusCatalog(uniquePrefix('kvfail'));
    const other = await connect({ servers: natsUrl() });
    const kv = openGovernorBucket(other, catalog);
    await other.close();
    const lines = recordingLog();
    const view = await startDecisionView({
      nc,
      kv,
      subject: catalog.subjects.governorDecisions,
      log: lines.log,
    });
    view.stop();
    assert.deepEqual(lines.warnings, ['could not read the governor decision; waiting for one']);
    assert.deepEqual(lines.infos, []);
  });
});
