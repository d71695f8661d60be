/**
 * The event hub when the NATS server ends its subscription: an operator's reload that takes the
 * gateway's permission to the event subjects away and gives it back (a mistake corrected, a
 * rotation of the permissions). The watches open then, and those that come later, must hear the
 * notices again once the permission is back, not only their periodic re-check of Postgres.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { NatsConnection } from '@nats-io/transport-node';
import {
  closeNats,
  connectNats,
  createBusCatalog,
  encodeMessage,
  type BusCatalog,
} from '@sluice/bus';
import { startNatsServer, uniquePrefix, type NatsServer } from '@sluice/bus/testing';
import { createCapturingLogger } from '@sluice/telemetry/testing';
import { startEventHub } from './event-hub.js';

const TENANT = 'acme';
const OPEN_WATCH = '00000000-0000-4000-8000-000000000011';
const LATER_WATCH = '00000000-0000-4000-8000-000000000012';

let dir: string;
let configFile: string;
let server: NatsServer;
let hubConnection: NatsConnection;
let publisher: NatsConnection;
let catalog: BusCatalog;
const { log, lines: warnings } = createCapturingLogger('event-hub-resubscribe-test', 'warn');

/** The server's users; `gateway` may read the event subjects only when `eventsAllowed`. */
async function writeConfig(eventsAllowed: boolean): Promise<void> {
  const deny = eventsAllowed ? '' : `, deny: ["${catalog.subjects.eventsAll}"]`;
  await writeFile(
    configFile,
    `authorization {
  users = [
    { user: gateway, password: gw, permissions: { publish: { allow: [">"] }, subscribe: { allow: [">"]${deny} } } }
    { user: relay, password: rl }
  ]
}
`,
  );
}

/** Waits until `condition` holds, calling `poke` meanwhile, or fails after `timeoutMs`. */
async function waitFor(
  what: string,
  condition: () => boolean,
  poke: () => void = () => undefined,
  timeoutMs = 10_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) assert.fail(`${what}: not within ${timeoutMs} ms`);
    poke();
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

function publishNotice(taskId: string, seq: number): void {
  publisher.publish(
    catalog.subjects.events(TENANT, taskId),
    encodeMessage({
      type: 'task.event',
      task_id: taskId,
      tenant_id: TENANT,
      seq,
      event: 'step_started',
      from_status: null,
      to_status: null,
      step: 'only',
      at: new Date().toISOString(),
    }),
  );
}

before(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'sluice-event-hub-'));
  configFile = path.join(dir, 'nats.conf');
  catalog = createBusCatalog(uniquePrefix('event-hub-resub'));
  await writeConfig(true);
  server = await startNatsServer({ configFile });
  hubConnection = await connectNats({
    url: server.url,
    name: 'event-hub-resubscribe-test',
    user: 'gateway',
    pass: 'gw',
  });
  publisher = await connectNats({ url: server.url, name: 'relay', user: 'relay', pass: 'rl' });
});

after(async () => {
  await closeNats(publisher);
  await closeNats(hubConnection);
  await server[Symbol.asyncDispose]();
  await rm(dir, { recursive: true, force: true });
});

describe('event hub, its subscription ended by the server', () => {
  it('subscribes again, for the watch open and for a later one', async () => {
    const hub = startEventHub(hubConnection, catalog, log, 60_000);
    const open: number[] = [];
    const stopOpen = await hub.listen(OPEN_WATCH, (seq) => open.push(seq));
    let stopLater: (() => void) | undefined;
    try {
      publishNotice(OPEN_WATCH, 1);
      await waitFor('the first notice', () => open.includes(1));

      warnings.length = 0;
      await writeConfig(false);
      server.reload();
      await waitFor('the permission violation', () =>
        warnings.some((line) => line.includes('Permissions Violation')),
      );

      await writeConfig(true);
      server.reload();
      // A new watch once the permission is back, as a user's next WatchTask.
      const later: number[] = [];
      stopLater = await hub.listen(LATER_WATCH, (seq) => later.push(seq));
      await waitFor(
        'a notice for the later watch',
        () => later.length > 0,
        () => publishNotice(LATER_WATCH, 2),
      );
      await waitFor(
        'a notice for the watch open through it',
        () => open.some((seq) => seq > 1),
        () => publishNotice(OPEN_WATCH, 2),
      );
    } finally {
      stopLater?.();
      stopOpen();
      hub.close();
    }
  });
});
