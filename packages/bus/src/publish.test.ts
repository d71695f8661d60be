import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { SluiceErrorCode, isSluiceError } from '@sluice/core';
import { createBusCatalog } from './catalog.js';
import { dispatchMsgId, encodeMessage } from './messages.js';
import { BusPublishError, publishDurable } from './publish.js';
import { ensureTopology } from './topology.js';
import { closeNats, connectNats } from './connect.js';
import { natsUrl, startNatsServer, uniquePrefix } from './testing/index.js';

const TASK = '6f1c2b8e-9d0a-4e3f-8b7c-5a4d3e2f1a0b';

describe('publishDurable', () => {
  const catalog = createBusCatalog(uniquePrefix('publish'));
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  let js: JetStreamClient;

  before(async () => {
    nc = await connect({ servers: natsUrl() });
    jsm = await jetstreamManager(nc);
    js = jetstream(nc);
    await ensureTopology(jsm, catalog, { steps: { maxMsgs: 3 } });
  });

  after(async () => {
    for (const name of Object.values(catalog.streams)) {
      await jsm.streams.delete(name).catch(() => false);
    }
    await nc.close();
  });

  const dispatch = (stepSeq: number) =>
    encodeMessage({
      type: 'step.dispatch',
      task_id: TASK,
      step_seq: stepSeq,
      dispatch: 1,
      tenant_id: 'acme',
      priority: 0,
      resource: 'llm',
    });

  it('stores a message once per message id and reports the repeat as a duplicate', async () => {
    const subject = catalog.subjects.step('llm', 0);
    const msgID = dispatchMsgId(TASK, 1, 1);
    const first = await publishDurable(js, subject, dispatch(1), { msgID });
    assert.equal(first.duplicate, false);
    assert.equal(first.stream, catalog.streams.steps);
    const second = await publishDurable(js, subject, dispatch(1), { msgID });
    assert.deepEqual(second, { ...first, duplicate: true });
    const other = await publishDurable(js, subject, dispatch(1), {
      msgID: dispatchMsgId(TASK, 1, 2),
    });
    assert.equal(other.duplicate, false);
    assert.equal(other.seq, first.seq + 1);
    const { state } = await jsm.streams.info(catalog.streams.steps);
    assert.equal(state.messages, 2);

    const stored = await jsm.streams.getMessage(catalog.streams.steps, { seq: first.seq });
    assert.equal(stored?.header.get('Nats-Msg-Id'), msgID);
  });

  it('answers resource_exhausted when the work queue is full, without retrying', async () => {
    const subject = catalog.subjects.step('llm', 1);
    // The stream holds 3 messages; the test above stored 2.
    await publishDurable(js, subject, dispatch(2), { msgID: dispatchMsgId(TASK, 2, 1) });
    await assert.rejects(
      publishDurable(js, subject, dispatch(3), { msgID: dispatchMsgId(TASK, 3, 1), attempts: 5 }),
      (err: unknown) => {
        assert.ok(err instanceof BusPublishError);
        assert.equal(err.code, 'resource_exhausted');
        assert.equal(err.attempts, 1);
        assert.equal(err.subject, subject);
        return true;
      },
    );
  });

  it('retries when nothing answers, then fails as unavailable', async () => {
    const nowhere = `${uniquePrefix('nostream')}.x`;
    const started = Date.now();
    await assert.rejects(
      publishDurable(js, nowhere, dispatch(4), {
        msgID: 'm-1',
        attempts: 3,
        timeoutMs: 500,
        backoffMs: 50,
      }),
      (err: unknown) => {
        assert.ok(err instanceof BusPublishError && isSluiceError(err));
        assert.equal(err.code, 'unavailable');
        assert.equal(err.attempts, 3);
        return true;
      },
    );
    // Two pauses of 50 and 100 ms between the three attempts.
    assert.ok(Date.now() - started >= 150);
  });

  it('survives a server outage by retrying with the same message id: one message is stored', async () => {
    const server = await startNatsServer();
    const own = createBusCatalog(uniquePrefix('publish_outage'));
    const client = await connectNats({ url: server.url, name: 'publish-outage-test' });
    try {
      await ensureTopology(await jetstreamManager(client), own);
      const ownJs = jetstream(client);
      await server.stop();
      const publishing = publishDurable(ownJs, own.subjects.step('llm', 0), dispatch(6), {
        msgID: dispatchMsgId(TASK, 6, 1),
        timeoutMs: 700,
        attempts: 20,
        backoffMs: 50,
      });
      // Let at least one attempt time out while the server is down.
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      await server.restart();
      const ack = await publishing;
      assert.equal(ack.stream, own.streams.steps);
      const { state } = await (await jetstreamManager(client)).streams.info(own.streams.steps);
      assert.equal(state.messages, 1, 'attempts buffered during the outage were de-duplicated');
      assert.equal(ack.seq, state.last_seq);
    } finally {
      await closeNats(client, 1_000);
      await server[Symbol.asyncDispose]();
    }
  });

  it('refuses a missing message id or bad numbers before publishing', async () => {
    const subject = catalog.subjects.step('llm', 2);
    for (const options of [
      { msgID: '' },
      { msgID: 'x', attempts: 0 },
      { msgID: 'x', timeoutMs: -1 },
    ]) {
      await assert.rejects(publishDurable(js, subject, dispatch(5), options), (err: unknown) =>
        isSluiceError(err, SluiceErrorCode.InvalidArgument),
      );
    }
  });
});
