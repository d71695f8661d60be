import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { SluiceError } from '@sluice/core';
import { createBusCatalog } from './catalog.js';
import {
  MAX_GUARD_CAPS_BYTES,
  decodeGuardCaps,
  encodeGuardCaps,
  startGuardCapsView,
} from './guard-caps.js';
import { natsUrl, uniquePrefix } from './testing/index.js';

const encoder = new TextEncoder();

function refused(data: string, field: string): void {
  assert.throws(
    () => decodeGuardCaps(encoder.encode(data)),
    (error: unknown) =>
      error instanceof SluiceError && error.code === 'invalid_argument' && error.field === field,
    data.slice(0, 80),
  );
}

describe('guard caps notices', () => {
  it('round-trip, dropping unknown fields', () => {
    const notice = { scheduler_id: 's-1', caps: { llm: 0, 'tool:http': 3 } };
    const data = encoder.encode(JSON.stringify({ ...notice, extra: true }));
    assert.deepEqual(decodeGuardCaps(data), notice);
    assert.deepEqual(decodeGuardCaps(encodeGuardCaps(notice)), notice);
  });

  it('refuse what is not a notice, naming the field', () => {
    refused('not json', 'notice');
    refused('[]', 'notice');
    refused('{"caps":{}}', 'scheduler_id');
    refused('{"scheduler_id":"s","caps":[]}', 'caps');
    refused('{"scheduler_id":"s","caps":{"Bad Resource":1}}', 'caps');
    refused('{"scheduler_id":"s","caps":{"llm":-1}}', 'caps.llm');
    refused('{"scheduler_id":"s","caps":{"llm":1.5}}', 'caps.llm');
    refused(`{"scheduler_id":"${'x'.repeat(MAX_GUARD_CAPS_BYTES)}","caps":{}}`, 'notice');
    assert.throws(() => encodeGuardCaps({ scheduler_id: '', caps: {} }), SluiceError);
  });
});

describe('startGuardCapsView', () => {
  let nc: NatsConnection;
  before(async () => {
    nc = await connect({ servers: natsUrl() });
  });
  after(async () => {
    await nc.drain();
  });

  /** Waits until `probe` holds (notices reach the view asynchronously). */
  async function until(what: string, probe: () => boolean): Promise<void> {
    const deadline = Date.now() + 5_000;
    while (!probe()) {
      assert.ok(Date.now() < deadline, `timed out waiting until ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }

  it('gives the lowest cap of the schedulers heard from lately, and forgets lifted and silent ones', async () => {
    const subject = createBusCatalog(uniquePrefix('guard_caps')).subjects.guardCaps;
    let clock = 0;
    const warnings: string[] = [];
    const view = startGuardCapsView({
      nc,
      subject,
      log: { warn: (_fields, message) => void warnings.push(message) },
      freshMs: 1_000,
      now: () => clock,
    });
    try {
      const send = (scheduler_id: string, caps: Record<string, number>) =>
        nc.publish(subject, encodeGuardCaps({ scheduler_id, caps }));
      assert.equal(view.capOf('llm'), undefined, 'no scheduler caps anything');

      send('a', { llm: 4 });
      await until('a caps llm', () => view.capOf('llm') === 4);
      send('b', { llm: 0, 'tool:http': 2 });
      await until('b holds llm', () => view.capOf('llm') === 0);
      assert.equal(view.capOf('tool:http'), 2);
      assert.equal(view.capOf('browser'), undefined);
      assert.deepEqual(view.all(), { llm: 0, 'tool:http': 2 });

      // b lifts its caps: a's stands alone.
      send('b', {});
      await until('b lifted its caps', () => view.capOf('llm') === 4);
      assert.equal(view.capOf('tool:http'), undefined);

      // a falls silent: its caps stand for freshMs, then explain nothing.
      clock = 1_000;
      assert.equal(view.capOf('llm'), 4);
      clock = 1_001;
      assert.equal(view.capOf('llm'), undefined);
      assert.deepEqual(view.all(), {});

      nc.publish(subject, encoder.encode('{"scheduler_id":"c","caps":{"llm":"x"}}'));
      await until('the malformed notice was noticed', () => warnings.length === 1);
      assert.equal(warnings[0], 'ignored a malformed guard caps notice');
      assert.equal(view.capOf('llm'), undefined);
    } finally {
      view.stop();
    }
  });
});
