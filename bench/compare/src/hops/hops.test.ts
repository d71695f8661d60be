/**
 * A hop that fails to open leaves nothing behind: what it had set up before the failing step (a
 * test database, a stream, a connection) is undone before the error reaches the caller.
 */
import assert from 'node:assert/strict';
import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import { jetstreamManager } from '@nats-io/jetstream';
import postgres from 'postgres';
import { closeNats, connectNats } from '@sluice/bus';
import { natsUrl } from '@sluice/bus/testing';
import { adminDatabaseUrl } from '@sluice/db/testing';
import { openJetStreamHop, openPostgresHop } from './hops.js';

/** The test databases this process created that still exist. */
async function ownDatabases(): Promise<string[]> {
  const sql = postgres(adminDatabaseUrl(), { max: 1, onnotice: () => undefined });
  try {
    const rows = await sql<{ name: string }[]>`
      select datname as name from pg_database
      where shobj_description(oid, 'pg_database') like '{%'
        and (shobj_description(oid, 'pg_database')::jsonb ->> 'pid') = ${String(process.pid)}
        and (shobj_description(oid, 'pg_database')::jsonb ->> 'host') = ${hostname()}`;
    return rows.map((row) => row.name);
  } finally {
    await sql.end();
  }
}

/** The hops' streams on the server now. */
async function hopStreams(): Promise<string[]> {
  const nc = await connectNats({ url: natsUrl(), name: 'bench-hops-test' });
  try {
    const jsm = await jetstreamManager(nc);
    const names: string[] = [];
    for await (const name of jsm.streams.names()) {
      if (name.startsWith('BENCH_HOPS_')) names.push(name);
    }
    return names;
  } finally {
    await closeNats(nc);
  }
}

/** Sockets this process holds open (a NATS connection left open is one). */
function openSockets(): number {
  return process.getActiveResourcesInfo().filter((kind) => kind === 'TCPSocketWrap').length;
}

test('a Postgres hop whose setup fails drops its database', async () => {
  const before = await ownDatabases();
  await assert.rejects(
    openPostgresHop(
      (sql) => sql`select 1`,
      (sql) => sql`create table hops (payload no_such_type)`,
    ),
    /no_such_type/,
  );
  assert.deepEqual(await ownDatabases(), before);
});

test('a JetStream hop whose consumer cannot be added removes its stream and connection', async () => {
  const streams = await hopStreams();
  await sleep(50); // A closed socket leaves the list on a later tick.
  const sockets = openSockets();
  // A durable name with a dot is refused.
  await assert.rejects(openJetStreamHop('delivery', 'no.dots'));
  await sleep(50);
  assert.equal(openSockets(), sockets, 'the hop closed its NATS connection');
  assert.deepEqual(await hopStreams(), streams);
});
