/**
 * The test run's watch on its servers: a server that stops answering for the grace period is
 * reported once; one that answers again within it is not.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { once } from 'node:events';
import { test } from 'node:test';
import {
  serversOf,
  watchServers,
  type WatchedServer as Server,
} from '../../scripts/lib/server-watch.mjs';

/** A server whose answers the test switches on and off. */
function switchable(name: string): Server & { up: boolean } {
  const server = {
    name,
    up: true,
    probe: () => (server.up ? Promise.resolve() : Promise.reject(new Error('connection refused'))),
  };
  return server;
}

/** The reason the watch gives for the first lost server; `lostServer()` is that server. */
function lostReason(
  servers: Server[],
  graceMs: number,
): Promise<string> & { stop(): void; lostServer(): Server | undefined } {
  let watch: { stop(): void } | undefined;
  let lostServer: Server | undefined;
  const reason = new Promise<string>((resolve) => {
    const onLost = (why: string, server: Server) => {
      lostServer = server;
      resolve(why);
    };
    watch = watchServers(servers, { onLost, intervalMs: 10, graceMs });
  });
  return Object.assign(reason, {
    stop: () => watch?.stop(),
    lostServer: () => lostServer,
  });
}

test('a server silent for the grace period is reported once, with its name and the error', async () => {
  const nats = switchable('NATS at 127.0.0.1:1');
  const postgres = switchable('Postgres at 127.0.0.1:2');
  const reports: string[] = [];
  const lost = lostReason([nats, postgres], 100);
  void lost.then((reason) => reports.push(reason));
  nats.up = false;
  const reason = await lost;
  assert.match(
    reason,
    /^NATS at 127\.0\.0\.1:1 has not answered for \d+ s \(connection refused\)$/,
  );
  assert.equal(lost.lostServer(), nats, 'the lost server is handed over with the reason');
  // Watching stopped with the report: no second one, however long the server stays down.
  await new Promise((resolve) => setTimeout(resolve, 150));
  assert.equal(reports.length, 1);
});

test('a server that answers again within the grace period is not reported', async () => {
  const nats = switchable('NATS');
  const lost = lostReason([nats], 400);
  let reported = false;
  void lost.then(() => (reported = true));
  nats.up = false;
  // Down for about half the grace period, then up: the watch must see it answer again before
  // the grace runs out (probes every 10 ms).
  await new Promise((resolve) => setTimeout(resolve, 200));
  nats.up = true;
  await new Promise((resolve) => setTimeout(resolve, 400));
  lost.stop();
  assert.equal(reported, false);
});

test('the probes of NATS_URL and DATABASE_URL reach their servers', async (t) => {
  // A fake NATS that greets like one, and a listener standing in for Postgres.
  const nats = net.createServer((socket) => socket.end('INFO {"jetstream":true}\r\n'));
  const postgres = net.createServer((socket) => socket.end());
  t.after(() => {
    nats.close();
    postgres.close();
  });
  nats.listen(0, '127.0.0.1');
  postgres.listen(0, '127.0.0.1');
  await Promise.all([once(nats, 'listening'), once(postgres, 'listening')]);
  const natsPort = (nats.address() as net.AddressInfo).port;
  const pgPort = (postgres.address() as net.AddressInfo).port;
  const servers: Server[] = serversOf({
    natsUrl: `nats://127.0.0.1:${natsPort},nats://127.0.0.1:1`,
    databaseUrl: `postgres://postgres@127.0.0.1:${pgPort}/sluice`,
  });
  assert.deepEqual(
    servers.map(({ name, kind, port }) => ({ name, kind, port })),
    [
      { name: `NATS at 127.0.0.1:${natsPort}`, kind: 'nats', port: natsPort },
      { name: `Postgres at 127.0.0.1:${pgPort}`, kind: 'postgres', port: pgPort },
    ],
  );
  for (const server of servers) await server.probe();
  postgres.close();
  await once(postgres, 'close');
  await assert.rejects(servers[1]!.probe());
  // A Postgres Unix socket and a WebSocket NATS URL have no TCP port to probe.
  assert.deepEqual(
    serversOf({
      natsUrl: 'ws://127.0.0.1:8080',
      databaseUrl: 'postgres://postgres@/sluice?host=/var/run/postgresql',
    }),
    [],
  );
});
