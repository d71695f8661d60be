/**
 * AdminService's backpressure RPCs and `sluice pressure`, end to end, on a gateway running in this
 * process against the machine's real NATS and Postgres (no governor runs: the test writes the
 * decision into the governor bucket and the breakers into Postgres as the governor would):
 * - GetPressure answers "no decision, stale" while the governor bucket does not exist, then the
 *   decision exactly as stored (every field mapped), stale once it is older than 10 s, the
 *   breakers with their transitions, and the active overrides;
 * - SetOverride (SDK and CLI) writes the override Postgres then holds, replacing the previous one
 *   of the same target; ClearOverride (CLI) clears it, and a second clear is NOT_FOUND;
 * - bad input is INVALID_ARGUMENT naming the field, with nothing written; a tenant key is
 *   PERMISSION_DENIED and no key UNAUTHENTICATED, for all three RPCs;
 * - GetPressure and `sluice pressure` list the urgent-wait guard caps the schedulers announce (the
 *   test sends the notices a scheduler would).
 */
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { JetStreamApiError, jetstreamManager } from '@nats-io/jetstream';
import { Kvm, type KV } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { fromTimestamp } from '@sluice/api';
import {
  closeNats,
  connectNats,
  DECISIONS_KEY,
  encodeDecision,
  encodeGuardCaps,
  type GovernorDecision,
} from '@sluice/bus';
import { natsUrl } from '@sluice/bus/testing';
import { CLOSED_BREAKER, type BreakerState } from '@sluice/core';
import { advanceLeaderEpoch, createApiKey, createTenant, saveBreaker } from '@sluice/db';
import { createAdminClient, type AdminClient } from '@sluice/sdk/client';
import { runCli } from '../../packages/cli/src/main.js';
import {
  expectInvalidField,
  expectStatus,
  startGatewayFixture,
  type GatewayFixture,
} from '../support/gateway-fixture.js';

const HOLDER = 'governor-test-1';

let fx: GatewayFixture;
let nc: NatsConnection;
let admin: AdminClient;
let adminKey: string;
let tenantKey: string;
let governorBucket: KV | undefined;

before(async () => {
  fx = await startGatewayFixture('pressure-admin');
  nc = await connectNats({ url: natsUrl(), name: 'pressure-admin-test' });
  await createTenant(fx.database.db, { id: 'ops' });
  adminKey = await createApiKey(fx.database.db, { tenantId: 'ops', isAdmin: true });
  tenantKey = await fx.tenantWithKey('acme');
  admin = createAdminClient({ address: fx.address, apiKey: adminKey, timeoutMs: 10_000 });
});

after(async () => {
  admin?.close();
  if (nc) {
    // The fixture deletes the streams the gateway made; the governor bucket is this test's.
    const jsm = await jetstreamManager(nc);
    await jsm.streams.delete(`KV_${fx.catalog.buckets.governor}`).catch((error: unknown) => {
      if (!(error instanceof JetStreamApiError)) throw error;
    });
    await closeNats(nc);
  }
  await fx?.stop();
});

/** Runs `sluice <args>` in this process against the fixture's gateway. */
async function sluice(
  args: readonly string[],
  apiKey = adminKey,
): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(args, {
    env: { SLUICE_ADDRESS: fx.address, SLUICE_API_KEY: apiKey },
    output: { out: (line) => out.push(line), err: (line) => err.push(line) },
    signal: new AbortController().signal,
  });
  return { code, out: out.join('\n'), err: err.join('\n') };
}

interface OverrideRow {
  id: string;
  kind: string;
  target: string;
  value: string;
  reason: string;
  expires_at: Date | null;
  cleared_at: Date | null;
}

/** Every row of `governor_overrides`, cleared ones included, by id. */
async function overrideRows(): Promise<OverrideRow[]> {
  const rows = await fx.database.sql<
    (Omit<OverrideRow, 'expires_at' | 'cleared_at'> & {
      expires_at: string | null;
      cleared_at: string | null;
    })[]
  >`
    select id::text as id, kind, target, value, reason, expires_at::text, cleared_at::text
    from governor_overrides order by id`;
  const time = (text: string | null) => (text === null ? null : new Date(text));
  return rows.map((r) => ({
    ...r,
    expires_at: time(r.expires_at),
    cleared_at: time(r.cleared_at),
  }));
}

/** Runs `action` and asserts `governor_overrides` holds the same rows afterwards. */
async function expectNoOverrideWritten(action: () => Promise<unknown>): Promise<void> {
  const before = await overrideRows();
  await action();
  assert.deepEqual(await overrideRows(), before, 'no override was written or cleared');
}

/** A decision as the governor writes it, made `ageMs` ago. */
function decisionAged(ageMs: number): GovernorDecision {
  return {
    epoch: 7,
    holder: HOLDER,
    level: 'reject',
    holds: [2, 3],
    reject: [3],
    decided_at: new Date(Date.now() - ageMs).toISOString(),
    reasons: ['llm_rate_limit llm 0.31 ≥ 0.3', 'queue_depth all 5200 ≥ 5000'],
    retry_after_ms: 30_000,
    throttle: [1],
    degrade: [1, 2, 3],
    limits: { llm: 12, 'tool:search': 1 },
    breakers: { 'tool:search': 'open', 'tool:fetch': 'half_open' },
    signals: [
      { signal: 'llm_rate_limit', scope: 'llm', value: 0.31, level: 'hold_p3' },
      { signal: 'queue_depth', scope: 'all', value: 5200, level: 'reject_p3' },
    ],
  };
}

async function putDecision(decision: GovernorDecision): Promise<void> {
  governorBucket ??= await new Kvm(nc).create(fx.catalog.buckets.governor, { history: 1 });
  await governorBucket.put(DECISIONS_KEY, encodeDecision(decision));
}

describe('GetPressure', () => {
  it('answers "no decision, stale" before any governor created its bucket', async () => {
    const response = await admin.getPressure();
    assert.deepEqual(response, {
      decision: null,
      stale: true,
      breakers: [],
      overrides: [],
      guard_caps: [],
    });
  });

  it('shows the stored decision, every field mapped, and calls it fresh', async () => {
    const stored = decisionAged(1_000);
    await putDecision(stored);
    const { decision, stale } = await admin.getPressure();
    assert.equal(stale, false);
    assert.ok(decision !== null);
    assert.equal(
      fromTimestamp(decision.decide_time ?? { seconds: '0', nanos: 0 }).toISOString(),
      stored.decided_at,
    );
    assert.deepEqual(
      { ...decision, decide_time: null },
      {
        level: 'PRESSURE_LEVEL_REJECT',
        decide_time: null,
        holds: ['PRIORITY_P2', 'PRIORITY_P3'],
        rejects: ['PRIORITY_P3'],
        retry_after: { seconds: '30', nanos: 0 },
        throttles: ['PRIORITY_P1'],
        degrades: ['PRIORITY_P1', 'PRIORITY_P2', 'PRIORITY_P3'],
        limits: [
          { resource: 'llm', limit: 12 },
          { resource: 'tool:search', limit: 1 },
        ],
        breakers: [
          { resource: 'tool:fetch', status: 'BREAKER_STATUS_HALF_OPEN' },
          { resource: 'tool:search', status: 'BREAKER_STATUS_OPEN' },
        ],
        signals: stored.signals,
        reasons: stored.reasons,
        epoch: '7',
        holder: HOLDER,
      },
    );
  });

  it('calls a decision older than 10 s stale, and still shows it', async () => {
    await putDecision(decisionAged(60_000));
    const { decision, stale } = await admin.getPressure();
    assert.equal(stale, true);
    assert.equal(decision?.level, 'PRESSURE_LEVEL_REJECT');
    await putDecision(decisionAged(0));
    assert.equal((await admin.getPressure()).stale, false, 'a fresh decision is live again');
  });

  it('lists the breakers Postgres holds with their recent transitions, newest first', async () => {
    const epoch = await advanceLeaderEpoch(fx.database.db, 'governor', HOLDER);
    const coolDownUntil = new Date(Date.now() + 30_000);
    const open: BreakerState = {
      ...CLOSED_BREAKER,
      status: 'open',
      coolDownUntilMs: coolDownUntil.getTime(),
      reason: 'error rate 0.6 ≥ 0.5',
    };
    const halfOpen: BreakerState = { ...open, status: 'half_open', coolDownUntilMs: null };
    const db = fx.database.db;
    const opened = { from: 'closed', to: 'open', reason: 'error rate 0.6 ≥ 0.5' } as const;
    assert.ok(
      await saveBreaker(db, { resource: 'tool:search', state: open, transition: opened }, epoch),
    );
    assert.ok(await saveBreaker(db, { resource: 'llm', state: open, transition: opened }, epoch));
    const probing = { from: 'open', to: 'half_open', reason: 'cool-down over' } as const;
    assert.ok(
      await saveBreaker(db, { resource: 'llm', state: halfOpen, transition: probing }, epoch),
    );

    const { breakers } = await admin.getPressure();
    assert.deepEqual(
      breakers.map((b) => [b.resource, b.status, b.reason]),
      [
        ['llm', 'BREAKER_STATUS_HALF_OPEN', 'error rate 0.6 ≥ 0.5'],
        ['tool:search', 'BREAKER_STATUS_OPEN', 'error rate 0.6 ≥ 0.5'],
      ],
    );
    const [llm, search] = breakers;
    assert.ok(llm && search);
    assert.equal(llm.cool_down_end_time, null);
    assert.equal(
      fromTimestamp(search.cool_down_end_time ?? { seconds: '0', nanos: 0 }).getTime(),
      coolDownUntil.getTime(),
    );
    assert.ok(search.change_time !== null);
    assert.deepEqual(
      llm.recent_transitions.map((t) => [t.from_status, t.to_status, t.reason, t.epoch]),
      [
        ['BREAKER_STATUS_OPEN', 'BREAKER_STATUS_HALF_OPEN', 'cool-down over', String(epoch)],
        ['BREAKER_STATUS_CLOSED', 'BREAKER_STATUS_OPEN', 'error rate 0.6 ≥ 0.5', String(epoch)],
      ],
    );
    assert.equal(search.recent_transitions.length, 1);
  });
});

describe('overrides', () => {
  it('SetOverride writes the override with its expiry; GetPressure lists it', async () => {
    const started = Date.now();
    const { override } = await admin.setOverride({
      kind: 'OVERRIDE_KIND_BREAKER',
      target: 'tool:search',
      value: 'closed',
      reason: 'vendor confirmed the outage is over',
      ttlMs: 10 * 60_000,
    });
    assert.equal(override.kind, 'OVERRIDE_KIND_BREAKER');
    assert.ok(override.expire_time !== null);
    const expires = fromTimestamp(override.expire_time).getTime();
    assert.ok(expires >= started + 10 * 60_000 && expires <= Date.now() + 10 * 60_000);

    const row = (await overrideRows()).find((r) => r.id === override.override_id);
    assert.deepEqual(
      { ...row, expires_at: row?.expires_at?.getTime() },
      {
        id: override.override_id,
        kind: 'breaker',
        target: 'tool:search',
        value: 'closed',
        reason: 'vendor confirmed the outage is over',
        expires_at: expires,
        cleared_at: null,
      },
    );
    const { overrides } = await admin.getPressure();
    assert.deepEqual(overrides, [override]);
  });

  it('SetOverride takes a ttl of a few milliseconds: the expiry counts from the write', async () => {
    // The gateway's clock before the write and the write's own time are apart by the call's work.
    for (let round = 0; round < 3; round++) {
      for (let ttlMs = 1; ttlMs <= 10; ttlMs++) {
        const { override } = await admin.setOverride({
          kind: 'OVERRIDE_KIND_BREAKER',
          target: 'tool:short',
          value: 'open',
          reason: `ttl ${ttlMs} ms`,
          ttlMs,
        });
        assert.ok(override.create_time !== null && override.expire_time !== null);
        const lasts =
          fromTimestamp(override.expire_time).getTime() -
          fromTimestamp(override.create_time).getTime();
        assert.ok(lasts >= ttlMs - 1 && lasts <= ttlMs + 1, `ttl ${ttlMs} ms lasts ${lasts} ms`);
      }
    }
  });

  it('sluice pressure override sets one through the CLI, replacing the previous of that target', async () => {
    const first = await sluice([
      'pressure',
      'override',
      'priority',
      'P3',
      'hold',
      '--reason',
      'incident 42',
    ]);
    assert.equal(first.code, 0, first.err);
    const firstId = /override (\d+) set/.exec(first.out)?.[1];
    assert.ok(firstId !== undefined, first.out);
    assert.match(first.out, /priority 3 hold until cleared; clear it: sluice pressure clear \d+/);

    const second = await sluice([
      'pressure',
      'override',
      'priority',
      '3',
      'release',
      '--reason',
      'incident 42 over',
      '--ttl',
      '1h30m',
      '--json',
    ]);
    assert.equal(second.code, 0, second.err);
    const { override } = JSON.parse(second.out) as {
      override: { override_id: string; value: string };
    };
    assert.equal(override.value, 'release');

    const rows = await overrideRows();
    const previous = rows.find((r) => r.id === firstId);
    const current = rows.find((r) => r.id === override.override_id);
    assert.ok(previous?.cleared_at instanceof Date, 'the previous override was cleared');
    assert.equal(current?.kind, 'priority');
    assert.equal(current?.target, '3');
    assert.equal(current?.cleared_at, null);
    assert.ok(current?.expires_at instanceof Date);
    const ttl = current.expires_at.getTime() - Date.now();
    assert.ok(ttl > 89 * 60_000 && ttl <= 90 * 60_000, `expires in ${ttl} ms`);

    const limit = await sluice(['pressure', 'override', 'limit', 'llm', '4', '--reason', 'budget']);
    assert.equal(limit.code, 0, limit.err);
  });

  it('sluice pressure shows the level, signals, breakers and overrides with their ids', async () => {
    const { overrides } = await admin.getPressure();
    const shown = await sluice(['pressure']);
    assert.equal(shown.code, 0, shown.err);
    assert.match(shown.out, /^level +reject +decided .* ago by governor-test-1 \(epoch 7\)$/m);
    assert.match(shown.out, /^holds +P2, P3$/m);
    assert.match(shown.out, /^rejects +P3 \(retry after 30s\)$/m);
    assert.match(shown.out, /^throttles +P1$/m);
    assert.match(shown.out, /^degrade +P1, P2, P3$/m);
    assert.match(shown.out, /^limits +llm=12, tool:search=1$/m);
    assert.match(shown.out, /^SIGNAL +SCOPE +VALUE +LEVEL$/m);
    assert.match(shown.out, /^llm_rate_limit +llm +0\.31 +hold_p3$/m);
    assert.match(shown.out, /^tool:search +open +\S+ +in \d+s +error rate 0\.6 ≥ 0\.5$/m);
    assert.match(shown.out, /^llm +half_open /m);
    assert.equal(overrides.length, 3);
    for (const o of overrides) {
      assert.match(
        shown.out,
        new RegExp(
          `^${o.override_id} +${o.kind.slice('OVERRIDE_KIND_'.length).toLowerCase()} `,
          'm',
        ),
      );
    }
    assert.doesNotMatch(shown.out, /STALE/);
    assert.match(shown.out, /^no urgent-wait caps$/m);

    const json = await sluice(['pressure', '--json']);
    assert.equal(json.code, 0, json.err);
    const parsed = JSON.parse(json.out) as { overrides: unknown[]; stale: boolean };
    assert.equal(parsed.overrides.length, 3);
    assert.equal(parsed.stale, false);
  });

  it('GetPressure and sluice pressure list the urgent-wait caps the schedulers announce', async (t) => {
    const notices = [
      encodeGuardCaps({ scheduler_id: 'scheduler-a', caps: { llm: 3, 'tool:http': 0 } }),
      encodeGuardCaps({ scheduler_id: 'scheduler-b', caps: { llm: 1 } }),
    ];
    const send = () => notices.forEach((n) => nc.publish(fx.catalog.subjects.guardCaps, n));
    // Again and again, as schedulers do while they cap, so a slow call never finds them stale.
    send();
    const announcing = setInterval(send, 250);
    t.after(() => clearInterval(announcing));
    const deadline = Date.now() + 10_000;
    let listed = (await admin.getPressure()).guard_caps;
    while (listed.length < 2 || listed[0]?.cap !== 1) {
      assert.ok(Date.now() < deadline, `the caps never showed: ${JSON.stringify(listed)}`);
      await delay(20);
      listed = (await admin.getPressure()).guard_caps;
    }
    assert.deepEqual(
      listed,
      [
        { resource: 'llm', cap: 1 },
        { resource: 'tool:http', cap: 0 },
      ],
      'the lowest of the schedulers, by resource',
    );
    const shown = await sluice(['pressure']);
    assert.equal(shown.code, 0, shown.err);
    assert.match(shown.out, /^URGENT-WAIT CAP +P1-P3 IN FLIGHT$/m);
    assert.match(shown.out, /^llm +1$/m);
    assert.match(shown.out, /^tool:http +0 \(held\)$/m);

    clearInterval(announcing);
    for (const scheduler_id of ['scheduler-a', 'scheduler-b']) {
      nc.publish(fx.catalog.subjects.guardCaps, encodeGuardCaps({ scheduler_id, caps: {} }));
    }
    while ((await admin.getPressure()).guard_caps.length > 0) {
      assert.ok(Date.now() < deadline, 'the lifted caps stayed');
      await delay(20);
    }
  });

  it('sluice pressure clear clears an override; a second clear is NOT_FOUND', async () => {
    const { overrides } = await admin.getPressure();
    const target = overrides.find((o) => o.kind === 'OVERRIDE_KIND_LIMIT');
    assert.ok(target !== undefined);
    const cleared = await sluice(['pressure', 'clear', target.override_id]);
    assert.equal(cleared.code, 0, cleared.err);
    assert.equal(cleared.out, `cleared override ${target.override_id}`);
    const row = (await overrideRows()).find((r) => r.id === target.override_id);
    assert.ok(row?.cleared_at instanceof Date);
    assert.ok(
      !(await admin.getPressure()).overrides.some((o) => o.override_id === target.override_id),
    );

    const again = await sluice(['pressure', 'clear', target.override_id]);
    assert.equal(again.code, 1);
    assert.match(again.err, /^error: NOT_FOUND: no active override \d+$/);
    await expectStatus(admin.clearOverride('987654321'), grpc.status.NOT_FOUND);
  });
});

describe('bad input', () => {
  const valid = {
    kind: 'OVERRIDE_KIND_BREAKER',
    target: 'llm',
    value: 'open',
    reason: 'drill',
  } as const;
  const cases: [string, Partial<Parameters<AdminClient['setOverride']>[0]>, string][] = [
    ['an unspecified kind', { kind: 'OVERRIDE_KIND_UNSPECIFIED' }, 'kind'],
    ['a breaker of an invalid resource', { target: 'not a resource!' }, 'target'],
    ['a breaker neither open nor closed', { value: 'ajar' }, 'value'],
    [
      'a priority outside 0-3',
      { kind: 'OVERRIDE_KIND_PRIORITY', target: '4', value: 'hold' },
      'target',
    ],
    [
      'a priority neither held nor released',
      { kind: 'OVERRIDE_KIND_PRIORITY', target: '1', value: 'open' },
      'value',
    ],
    ['a limit of 0', { kind: 'OVERRIDE_KIND_LIMIT', value: '0' }, 'value'],
    ['an empty reason', { reason: ' ' }, 'reason'],
    ['a reason of 501 characters', { reason: 'x'.repeat(501) }, 'reason'],
    ['a reason holding U+0000', { reason: 'drill\u0000' }, 'reason'],
    ['a zero ttl', { ttlMs: 0 }, 'ttl'],
    ['a negative ttl', { ttlMs: -60_000 }, 'ttl'],
    ['a ttl over a year', { ttlMs: 400 * 24 * 3_600_000 }, 'ttl'],
  ];
  for (const [what, change, field] of cases) {
    it(`SetOverride refuses ${what}, naming ${field}`, async () => {
      await expectNoOverrideWritten(() =>
        expectInvalidField(admin.setOverride({ ...valid, ...change }), field),
      );
    });
  }

  it('ClearOverride refuses an empty or non-numeric id, naming override_id', async () => {
    await expectNoOverrideWritten(async () => {
      await expectInvalidField(admin.clearOverride(''), 'override_id');
      await expectInvalidField(admin.clearOverride('abc'), 'override_id');
      await expectInvalidField(admin.clearOverride('99999999999999999999'), 'override_id');
    });
  });

  it('sluice pressure override refuses a bad kind or ttl before calling', async () => {
    const kind = await sluice(['pressure', 'override', 'queue', 'x', 'y', '--reason', 'r']);
    assert.equal(kind.code, 2);
    const ttl = await sluice([
      'pressure',
      'override',
      'breaker',
      'llm',
      'open',
      '--reason',
      'r',
      '--ttl',
      '10 minutes',
    ]);
    assert.equal(ttl.code, 2);
    assert.match(ttl.err, /--ttl must be a duration/);
    const server = await sluice([
      'pressure',
      'override',
      'breaker',
      'llm',
      'ajar',
      '--reason',
      'r',
    ]);
    assert.equal(server.code, 1);
    assert.match(server.err, /^error: INVALID_ARGUMENT: value: /);
  });
});

describe('authentication', () => {
  it('refuses a tenant key (PERMISSION_DENIED) and no key (UNAUTHENTICATED), writing nothing', async () => {
    const tenant = createAdminClient({ address: fx.address, apiKey: tenantKey, timeoutMs: 10_000 });
    const nobody = createAdminClient({ address: fx.address, apiKey: '', timeoutMs: 10_000 });
    try {
      await expectNoOverrideWritten(async () => {
        for (const [client, code] of [
          [tenant, grpc.status.PERMISSION_DENIED],
          [nobody, grpc.status.UNAUTHENTICATED],
        ] as const) {
          await expectStatus(client.getPressure(), code);
          await expectStatus(
            client.setOverride({
              kind: 'OVERRIDE_KIND_LIMIT',
              target: 'llm',
              value: '1',
              reason: 'x',
            }),
            code,
          );
          const [active] = (await admin.getPressure()).overrides;
          assert.ok(active !== undefined);
          await expectStatus(client.clearOverride(active.override_id), code);
        }
      });
    } finally {
      tenant.close();
      nobody.close();
    }
  });
});
