/**
 * Governor overrides against a real Postgres: the newest of a (kind, target) wins (also under
 * concurrent adds), clearing, expiry (time set through `expires_at`, never by sleeping), and
 * validation in TypeScript and by the table's constraints.
 */
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import { sql } from 'drizzle-orm';
import { SluiceErrorCode, isSluiceError } from '@sluice/core';
import { openDatabase, type DatabaseHandle } from '../client.js';
import { migrateDatabase } from '../migrate.js';
import { createTestDatabase, migratedTemplate, type TestDatabase } from '../testing/index.js';
import {
  activeOverrides,
  addOverride,
  clearExpiredOverrides,
  clearOverride,
  type NewOverride,
} from './overrides.js';

let database: TestDatabase;
let handle: DatabaseHandle;

before(async () => {
  database = await createTestDatabase({ template: await migratedTemplate(migrateDatabase) });
  handle = openDatabase(database.url, { max: 8 });
});

after(async () => {
  await handle.close();
  await database.drop();
});

beforeEach(async () => {
  await handle.db.execute(sql`truncate governor_overrides`);
});

const inAnHour = () => new Date(Date.now() + 3_600_000);

/** Moves an override's expiry into the past, as if time had passed. */
async function expire(id: string): Promise<void> {
  await handle.db.execute(sql`
    update governor_overrides
    set created_at = now() - interval '2 hours', expires_at = now() - interval '1 second'
    where id = ${id}::bigint
  `);
}

function summary(overrides: Awaited<ReturnType<typeof activeOverrides>>): string[] {
  return overrides.map((o) => `${o.kind}/${o.target}=${o.value}`);
}

describe('addOverride', () => {
  it('stores an override and returns it', async () => {
    const expiresAt = inAnHour();
    const added = await addOverride(handle.db, {
      kind: 'breaker',
      target: 'tool:search',
      value: 'open',
      reason: 'vendor outage',
      expiresAt,
    });
    assert.match(added.id, /^[1-9][0-9]*$/);
    assert.equal(added.kind, 'breaker');
    assert.equal(added.target, 'tool:search');
    assert.equal(added.value, 'open');
    assert.equal(added.reason, 'vendor outage');
    assert.equal(added.expiresAt?.getTime(), expiresAt.getTime());
    assert.ok(added.createdAt instanceof Date);
    assert.deepEqual(await activeOverrides(handle.db), [added]);
  });

  it('replaces the active override of the same kind and target; others stay', async () => {
    const first = await addOverride(handle.db, {
      kind: 'priority',
      target: '3',
      value: 'hold',
      reason: 'db saturated',
    });
    await addOverride(handle.db, { kind: 'limit', target: 'llm:openai', value: '4', reason: 'x' });
    const second = await addOverride(handle.db, {
      kind: 'priority',
      target: '3',
      value: 'release',
      reason: 'recovered',
    });
    assert.deepEqual(summary(await activeOverrides(handle.db)), [
      'limit/llm:openai=4',
      'priority/3=release',
    ]);
    assert.notEqual(first.id, second.id);
    assert.equal(await clearOverride(handle.db, first.id), false, 'already cleared by the newer');
  });

  it('replaces an expired override nobody swept yet', async () => {
    const old = await addOverride(handle.db, {
      kind: 'breaker',
      target: 'tool:x',
      value: 'open',
      reason: 'x',
      expiresAt: inAnHour(),
    });
    await expire(old.id);
    await addOverride(handle.db, {
      kind: 'breaker',
      target: 'tool:x',
      value: 'closed',
      reason: 'y',
    });
    assert.deepEqual(summary(await activeOverrides(handle.db)), ['breaker/tool:x=closed']);
    assert.equal(await clearExpiredOverrides(handle.db), 0, 'the expired one was cleared already');
  });

  it('keeps exactly one of many concurrent adds of one target', async () => {
    const adds = Array.from({ length: 8 }, (_, i) =>
      addOverride(handle.db, {
        kind: 'limit',
        target: 'tool:race',
        value: `${i + 1}`,
        reason: 'r',
      }),
    );
    const added = await Promise.all(adds);
    assert.equal(new Set(added.map((o) => o.id)).size, 8, 'every add succeeded');
    const active = await activeOverrides(handle.db);
    assert.equal(active.length, 1);
    const newest = added.reduce((a, b) => (BigInt(a.id) > BigInt(b.id) ? a : b));
    assert.equal(active[0]?.id, newest.id, 'the last one committed wins');
  });

  it('validates each field with a SluiceError naming it', async () => {
    const base: NewOverride = { kind: 'breaker', target: 'tool:x', value: 'open', reason: 'why' };
    const cases: [Partial<NewOverride>, string][] = [
      [{ kind: 'speed' as NewOverride['kind'] }, 'kind'],
      [{ target: 'Not A Resource' }, 'target'],
      [{ target: '' }, 'target'],
      [{ value: 'half_open' }, 'value'],
      [{ kind: 'priority', target: '4', value: 'hold' }, 'target'],
      [{ kind: 'priority', target: '1', value: 'open' }, 'value'],
      [{ kind: 'limit', value: '0' }, 'value'],
      [{ kind: 'limit', value: '-3' }, 'value'],
      [{ kind: 'limit', value: '1.5' }, 'value'],
      [{ kind: 'limit', value: '1000000000' }, 'value'],
      [{ reason: '   ' }, 'reason'],
      [{ reason: 'why\u0000' }, 'reason'],
      [{ reason: 'half an emoji \uD83D' }, 'reason'],
      [{ expiresAt: new Date(Date.now() - 1_000) }, 'expires_at'],
      [{ expiresAt: new Date(Number.NaN) }, 'expires_at'],
      [{ ttlMs: 0 }, 'ttl'],
      [{ ttlMs: -5 }, 'ttl'],
      [{ ttlMs: Number.NaN }, 'ttl'],
      [{ ttlMs: 60_000, expiresAt: inAnHour() }, 'ttl'],
    ];
    for (const [change, field] of cases) {
      await assert.rejects(
        addOverride(handle.db, { ...base, ...change }),
        (error) => isSluiceError(error, SluiceErrorCode.InvalidArgument) && error.field === field,
        JSON.stringify(change),
      );
    }
    // The good ones of each kind pass.
    await addOverride(handle.db, { kind: 'priority', target: '0', value: 'hold', reason: 'r' });
    await addOverride(handle.db, { kind: 'limit', target: 'llm', value: '999999999', reason: 'r' });
    assert.equal((await activeOverrides(handle.db)).length, 2);
  });

  it('has the table refuse what validation refuses, for writers that bypass it', async () => {
    const bad = [
      sql`('speed', 'tool:x', 'open', 'r')`,
      sql`('breaker', 'tool:x', 'half_open', 'r')`,
      sql`('priority', '7', 'hold', 'r')`,
      sql`('priority', '1', 'open', 'r')`,
      sql`('limit', 'tool:x', '0', 'r')`,
      sql`('limit', 'tool:x', 'ten', 'r')`,
      sql`('breaker', '', 'open', 'r')`,
      sql`('breaker', 'tool:x', 'open', ' ')`,
    ];
    for (const row of bad) {
      await assert.rejects(
        handle.db.execute(
          sql`insert into governor_overrides (kind, target, value, reason) values ${row}`,
        ),
        (error) => String((error as { cause?: unknown }).cause ?? error).includes('check'),
      );
    }
    await assert.rejects(
      handle.db.execute(sql`
        insert into governor_overrides (kind, target, value, reason, expires_at)
        values ('breaker', 'tool:x', 'open', 'r', now() - interval '1 minute')
      `),
    );
    // Two uncleared rows of one (kind, target) cannot exist.
    await handle.db.execute(sql`
      insert into governor_overrides (kind, target, value, reason) values ('breaker', 'tool:y', 'open', 'r')
    `);
    await assert.rejects(
      handle.db.execute(sql`
        insert into governor_overrides (kind, target, value, reason) values ('breaker', 'tool:y', 'closed', 'r')
      `),
      (error) => String((error as { cause?: unknown }).cause ?? error).includes('unique'),
    );
  });
});

describe('a ttl', () => {
  it('counts from the write: even a microsecond ends after the override was created', async () => {
    for (const ttlMs of [0.001, 1, 2, 60_000]) {
      const added = await addOverride(handle.db, {
        kind: 'breaker',
        target: 'tool:x',
        value: 'open',
        reason: 'r',
        ttlMs,
      });
      const [row] = await handle.db.execute<{ lasts_us: string }>(sql`
        select ((extract(epoch from expires_at) - extract(epoch from created_at)) * 1000000)::bigint::text as lasts_us
        from governor_overrides where id = ${added.id}::bigint
      `);
      assert.equal(Number(row?.lasts_us), ttlMs * 1_000, `ttl ${ttlMs} ms`);
    }
  });
});

describe('clearOverride', () => {
  it('clears an active override once, and answers false for unknown ids', async () => {
    const added = await addOverride(handle.db, {
      kind: 'breaker',
      target: 'tool:x',
      value: 'closed',
      reason: 'false alarm',
    });
    assert.equal(await clearOverride(handle.db, added.id), true);
    assert.deepEqual(await activeOverrides(handle.db), []);
    assert.equal(await clearOverride(handle.db, added.id), false, 'already cleared');
    assert.equal(await clearOverride(handle.db, '987654321'), false);
    assert.equal(await clearOverride(handle.db, 'not-an-id'), false);
  });

  it('answers false for an expired one (it no longer applied) but clears it', async () => {
    const added = await addOverride(handle.db, {
      kind: 'limit',
      target: 'tool:x',
      value: '2',
      reason: 'r',
      expiresAt: inAnHour(),
    });
    await expire(added.id);
    assert.equal(await clearOverride(handle.db, added.id), false);
    assert.equal(await clearExpiredOverrides(handle.db), 0);
  });
});

describe('expiry', () => {
  it('drops expired overrides from the active ones and sweeps them', async () => {
    const lasting = await addOverride(handle.db, {
      kind: 'priority',
      target: '2',
      value: 'hold',
      reason: 'r',
    });
    const soon = await addOverride(handle.db, {
      kind: 'priority',
      target: '3',
      value: 'hold',
      reason: 'r',
      expiresAt: inAnHour(),
    });
    assert.deepEqual(
      (await activeOverrides(handle.db)).map((o) => o.id),
      [lasting.id, soon.id],
    );
    await expire(soon.id);
    assert.deepEqual(
      (await activeOverrides(handle.db)).map((o) => o.id),
      [lasting.id],
    );
    assert.equal(await clearExpiredOverrides(handle.db), 1);
    assert.equal(await clearExpiredOverrides(handle.db), 0);
    const rows = await handle.db.execute<{ cleared: boolean }>(sql`
      select cleared_at is not null as cleared from governor_overrides where id = ${soon.id}::bigint
    `);
    assert.equal(rows[0]?.cleared, true, 'kept as history, marked cleared');
  });
});
