/**
 * `sluice.v1.AdminService` end to end, on a gateway running in this process against the machine's
 * real NATS and Postgres, called by a client built from the `.proto` sources:
 * - every method works with an admin key, and its answers are what the database holds;
 * - for every method, a tenant key is PERMISSION_DENIED and a missing, wrong or revoked key
 *   UNAUTHENTICATED, before the request is looked at, with nothing written;
 * - a tenant and key created through the API work on TaskService at once; a key revoked through
 *   it is refused on its very next call;
 * - bad input is INVALID_ARGUMENT naming the field, missing things NOT_FOUND, a second revocation
 *   FAILED_PRECONDITION, all with nothing written;
 * - secrets appear once, in CreateApiKey's answer: never in ListApiKeys, never in the logs;
 * - a redrive racing a RetryTask of its task, or a redrive of another letter of it, is answered
 *   (one retries the task, the other is refused), never INTERNAL.
 */
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { PassThrough } from 'node:stream';
import { setTimeout as delay } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import {
  ADMIN_SERVICE_PROTO,
  PROTO_LOADER_OPTIONS,
  PROTO_ROOT,
  fromTimestamp,
  type ApiKey,
  type CreateApiKeyResponse,
  type CreateTenantResponse,
  type ListApiKeysResponse,
  type ListTenantsResponse,
  type PurgeDeadLettersResponse,
  type RedriveDeadLettersResponse,
  type RevokeApiKeyResponse,
  type Task,
} from '@sluice/api';
import { createApiKey, createTenant, insertDeadLetter } from '@sluice/db';
import { createLogger } from '@sluice/telemetry';
import {
  authorization,
  bearer,
  expectInvalidField,
  expectStatus,
  startGatewayFixture,
  type GatewayFixture,
} from '../support/gateway-fixture.js';

const TYPE = 'research-brief';
const INPUT = { topic: 'admin', sourceUrl: 'https://example.com/admin' };

/** A client of AdminService that sends exactly the request and metadata it is given. */
interface AdminClient {
  call<Res>(method: string, request: object, metadata: grpc.Metadata): Promise<Res>;
  close(): void;
}

function createAdminClient(address: string): AdminClient {
  const definition = protoLoader.loadSync(ADMIN_SERVICE_PROTO, {
    ...PROTO_LOADER_OPTIONS,
    includeDirs: [PROTO_ROOT],
  });
  const loaded = grpc.loadPackageDefinition(definition) as unknown as {
    sluice: { v1: { AdminService: grpc.ServiceClientConstructor } };
  };
  const stub = new loaded.sluice.v1.AdminService(address, grpc.credentials.createInsecure());
  const methods = stub as unknown as Record<string, unknown>;
  return {
    call: <Res>(method: string, request: object, metadata: grpc.Metadata) =>
      new Promise<Res>((resolve, reject) => {
        const fn = methods[method] as
          | ((
              request: object,
              metadata: grpc.Metadata,
              options: grpc.CallOptions,
              callback: (error: grpc.ServiceError | null, response: Res) => void,
            ) => void)
          | undefined;
        if (fn === undefined) return reject(new Error(`no method ${method}`));
        fn.call(stub, request, metadata, { deadline: Date.now() + 10_000 }, (error, response) =>
          error ? reject(error) : resolve(response),
        );
      }),
    close: () => stub.close(),
  };
}

/** Every line the gateway logged, as text. */
const logLines: string[] = [];
/** Every secret this test saw, to look for in the logs. */
const secrets: string[] = [];

let fx: GatewayFixture;
let admin: AdminClient;
/** An admin key of tenant `ops`, made as an operator would: with the bootstrap script's query. */
let adminKey: string;
/** A key of tenant `acme`: valid, but not an admin key. */
let tenantKey: string;

before(async () => {
  const logStream = new PassThrough();
  logStream.on('data', (chunk: Buffer) => logLines.push(...chunk.toString('utf8').split('\n')));
  fx = await startGatewayFixture('admin', {
    log: createLogger({ service: 'gateway', level: 'debug', destination: logStream }),
  });
  admin = createAdminClient(fx.address);
  await createTenant(fx.database.db, { id: 'ops' });
  adminKey = await createApiKey(fx.database.db, { tenantId: 'ops', isAdmin: true });
  tenantKey = await fx.tenantWithKey('acme');
  secrets.push(adminKey, tenantKey);
});

after(async () => {
  admin?.close();
  await fx?.stop();
});

/** Calls AdminService with the admin key. */
function asAdmin<Res>(method: string, request: object): Promise<Res> {
  return admin.call<Res>(method, request, bearer(adminKey));
}

/** The rows of the admin tables, to prove a call wrote nothing. */
async function adminRows(): Promise<{ tenants: number; keys: number; revoked: number }> {
  const [row] = await fx.database.sql<[{ tenants: number; keys: number; revoked: number }]>`
    select (select count(*)::int from tenants) as tenants,
           (select count(*)::int from api_keys) as keys,
           (select count(*)::int from api_keys where revoked_at is not null) as revoked`;
  return { tenants: row.tenants, keys: row.keys, revoked: row.revoked };
}

/** Runs `action` and asserts the admin tables hold the same rows afterwards. */
async function expectNothingWritten(action: () => Promise<void>): Promise<void> {
  const before = await adminRows();
  await action();
  assert.deepEqual(await adminRows(), before, 'no tenant or key was written');
}

/** Creates a key through the API and remembers its secret. */
async function createKey(tenantId: string, isAdmin = false): Promise<CreateApiKeyResponse> {
  const created = await asAdmin<CreateApiKeyResponse>('CreateApiKey', {
    tenant_id: tenantId,
    admin: isAdmin,
  });
  secrets.push(created.secret);
  return created;
}

/** A well-formed key no tenant has. */
function unknownKey(): string {
  return `slk_${randomBytes(24).toString('base64url')}`;
}

describe('with an admin key', () => {
  it('CreateTenant creates a tenant and refuses an existing id', async () => {
    const started = Date.now();
    const { tenant } = await asAdmin<CreateTenantResponse>('CreateTenant', {
      tenant_id: 'globex',
      display_name: 'Globex Corporation',
    });
    assert.equal(tenant.tenant_id, 'globex');
    assert.equal(tenant.display_name, 'Globex Corporation');
    assert.ok(tenant.create_time !== null);
    assert.ok(Math.abs(fromTimestamp(tenant.create_time).getTime() - started) < 60_000);

    const { tenant: unnamed } = await asAdmin<CreateTenantResponse>('CreateTenant', {
      tenant_id: 'initech',
    });
    assert.equal(unnamed.display_name, 'initech', 'the display name defaults to the id');

    await expectNothingWritten(async () => {
      const error = await expectStatus(
        asAdmin('CreateTenant', { tenant_id: 'globex', display_name: 'Another' }),
        grpc.status.ALREADY_EXISTS,
      );
      assert.match(error.details, /globex/);
    });
    const [row] = await fx.database.sql`select name from tenants where id = 'globex'`;
    assert.equal(row?.['name'], 'Globex Corporation', 'the existing tenant is unchanged');
  });

  it('ListTenants pages through every tenant in id order, each once', async () => {
    for (const id of ['t-01', 't-02', 't-03', 't-04', 't-05']) {
      await asAdmin('CreateTenant', { tenant_id: id });
    }
    const stored = (await fx.database.sql`select id from tenants order by id`).map(
      (r) => r['id'] as string,
    );
    const seen: string[] = [];
    let token = '';
    let pages = 0;
    do {
      const page = await asAdmin<ListTenantsResponse>('ListTenants', {
        page_size: 2,
        page_token: token,
      });
      assert.ok(page.tenants.length <= 2, 'a page holds at most page_size tenants');
      seen.push(...page.tenants.map((t) => t.tenant_id));
      token = page.next_page_token;
      pages += 1;
      assert.ok(pages <= stored.length, 'the pages end');
    } while (token !== '');
    assert.deepEqual(seen, stored);
    assert.ok(seen.includes('ops') && seen.includes('acme') && seen.includes('globex'));

    const all = await asAdmin<ListTenantsResponse>('ListTenants', {});
    assert.deepEqual(
      all.tenants.map((t) => t.tenant_id),
      stored,
      'the default page holds them all',
    );
    assert.equal(all.next_page_token, '');
    const ops = all.tenants.find((t) => t.tenant_id === 'ops');
    assert.equal(ops?.display_name, 'ops');

    const capped = await asAdmin<ListTenantsResponse>('ListTenants', { page_size: 1_000_000 });
    assert.equal(capped.tenants.length, stored.length, 'a huge page_size is lowered, not refused');
  });

  it('CreateApiKey returns the key and its secret once; ListApiKeys describes it without it', async () => {
    const started = Date.now();
    const created = await createKey('globex');
    assert.match(created.secret, /^slk_[A-Za-z0-9_-]{32}$/);
    assert.equal(created.key.tenant_id, 'globex');
    assert.equal(created.key.admin, false);
    assert.equal(created.key.prefix, created.secret.slice(0, 10));
    assert.match(created.key.key_id, /^[0-9a-f-]{36}$/);
    assert.equal(created.key.revoke_time, null);
    assert.ok(created.key.create_time !== null);
    assert.ok(Math.abs(fromTimestamp(created.key.create_time).getTime() - started) < 60_000);

    const second = await createKey('globex', true);
    assert.equal(second.key.admin, true);
    assert.notEqual(second.secret, created.secret);

    const listed = await asAdmin<ListApiKeysResponse>('ListApiKeys', { tenant_id: 'globex' });
    assert.deepEqual(listed.keys, [created.key, second.key], 'oldest first, as created');
    for (const key of listed.keys) {
      assert.deepEqual(Object.keys(key).sort(), [
        'admin',
        'create_time',
        'key_id',
        'prefix',
        'revoke_time',
        'tenant_id',
      ]);
    }
    const hashes = (
      await fx.database.sql`select key_hash from api_keys where tenant_id = 'globex'`
    ).map((r) => r['key_hash'] as string);
    const text = JSON.stringify(listed);
    for (const secret of [created.secret, second.secret]) {
      assert.ok(!text.includes(secret), 'no secret in ListApiKeys');
      assert.ok(!text.includes(secret.slice(10)), 'not even the part after the prefix');
    }
    for (const hash of hashes) assert.ok(!text.includes(hash), 'no hash in ListApiKeys');

    const none = await asAdmin<ListApiKeysResponse>('ListApiKeys', { tenant_id: 'initech' });
    assert.deepEqual(none.keys, [], 'a tenant without keys lists none');
  });

  it('RevokeApiKey revokes once; a second revocation is FAILED_PRECONDITION', async () => {
    const { key } = await createKey('globex');
    const { key: revoked } = await asAdmin<RevokeApiKeyResponse>('RevokeApiKey', {
      key_id: key.key_id,
    });
    assert.equal(revoked.key_id, key.key_id);
    assert.ok(revoked.revoke_time !== null, 'the answer says when');
    assert.deepEqual({ ...revoked, revoke_time: null }, key, 'nothing else changed');

    await expectNothingWritten(async () => {
      await expectStatus(
        asAdmin('RevokeApiKey', { key_id: key.key_id }),
        grpc.status.FAILED_PRECONDITION,
      );
    });
    const { keys } = await asAdmin<ListApiKeysResponse>('ListApiKeys', { tenant_id: 'globex' });
    assert.deepEqual(
      keys.find((k) => k.key_id === key.key_id),
      revoked,
      'ListApiKeys shows the revocation',
    );
  });

  it('of two racing revocations of one key exactly one wins', async () => {
    const { key } = await createKey('globex');
    const outcomes = await Promise.allSettled([
      asAdmin('RevokeApiKey', { key_id: key.key_id }),
      asAdmin('RevokeApiKey', { key_id: key.key_id }),
    ]);
    const codes = outcomes
      .map((o) =>
        o.status === 'fulfilled' ? grpc.status.OK : (o.reason as grpc.ServiceError).code,
      )
      .sort();
    assert.deepEqual(codes, [grpc.status.OK, grpc.status.FAILED_PRECONDITION].sort());
  });
});

describe('a tenant and key created through the API', () => {
  it('work on TaskService at once', async () => {
    await asAdmin('CreateTenant', { tenant_id: 'umbrella', display_name: 'Umbrella' });
    const { secret } = await createKey('umbrella');
    const client = fx.client(secret);
    const { task, created } = await client.createTask({
      type: TYPE,
      priority: 'PRIORITY_P2',
      input: INPUT,
    });
    assert.equal(created, true);
    assert.equal(task.tenant_id, 'umbrella', 'the tenant comes from the new key');
    const { tasks } = await client.listTasks({});
    assert.deepEqual(
      tasks.map((t: Task) => t.task_id),
      [task.task_id],
    );
  });

  it('a revoked tenant key is UNAUTHENTICATED on its very next call', async () => {
    const { key, secret } = await createKey('umbrella');
    const client = fx.client(secret);
    await client.listTasks({}); // works while valid
    await asAdmin('RevokeApiKey', { key_id: key.key_id });
    await expectStatus(client.listTasks({}), grpc.status.UNAUTHENTICATED);
    await expectStatus(
      client.createTask({ type: TYPE, priority: 'PRIORITY_P2', input: INPUT }),
      grpc.status.UNAUTHENTICATED,
    );
  });

  it('a revoked admin key is UNAUTHENTICATED on its very next call, also when it revoked itself', async () => {
    const { key, secret } = await createKey('ops', true);
    await admin.call('ListTenants', {}, bearer(secret)); // works while valid
    const { key: revoked } = await admin.call<RevokeApiKeyResponse>(
      'RevokeApiKey',
      { key_id: key.key_id },
      bearer(secret),
    );
    assert.ok(revoked.revoke_time !== null);
    await expectStatus(admin.call('ListTenants', {}, bearer(secret)), grpc.status.UNAUTHENTICATED);
    await expectStatus(fx.client(secret).listTasks({}), grpc.status.UNAUTHENTICATED);
  });
});

/** One valid request per method; only the credentials will be wrong. */
const METHODS: readonly [method: string, request: () => object][] = [
  ['CreateTenant', () => ({ tenant_id: 'intruder', display_name: 'Intruder' })],
  ['ListTenants', () => ({ page_size: 10 })],
  ['CreateApiKey', () => ({ tenant_id: 'acme', admin: true })],
  ['ListApiKeys', () => ({ tenant_id: 'acme' })],
  ['RevokeApiKey', () => ({ key_id: randomUUID() })],
  ['ListDeadLetters', () => ({ page_size: 10 })],
  ['RedriveDeadLetters', () => ({ dead_letter_ids: [randomUUID()] })],
  ['PurgeDeadLetters', () => ({ dead_letter_ids: [randomUUID()] })],
];

describe('every method without an admin key', () => {
  let revokedAdminKey: string;
  let acmeKeyId: string;

  before(async () => {
    const { key, secret } = await createKey('ops', true);
    await asAdmin('RevokeApiKey', { key_id: key.key_id });
    revokedAdminKey = secret;
    const { keys } = await asAdmin<ListApiKeysResponse>('ListApiKeys', { tenant_id: 'acme' });
    const [acmeKey] = keys;
    assert.ok(acmeKey !== undefined);
    acmeKeyId = acmeKey.key_id;
  });

  const credentials: readonly [what: string, metadata: () => grpc.Metadata, code: grpc.status][] = [
    ['a tenant key', () => bearer(tenantKey), grpc.status.PERMISSION_DENIED],
    ['no key', () => new grpc.Metadata(), grpc.status.UNAUTHENTICATED],
    [
      'a malformed authorization',
      () => authorization('Basic b3BzOng='),
      grpc.status.UNAUTHENTICATED,
    ],
    ['a wrong key', () => bearer(unknownKey()), grpc.status.UNAUTHENTICATED],
    [
      'the admin key with one character changed',
      () => bearer(`${adminKey.slice(0, -1)}${adminKey.endsWith('x') ? 'y' : 'x'}`),
      grpc.status.UNAUTHENTICATED,
    ],
    ['a revoked admin key', () => bearer(revokedAdminKey), grpc.status.UNAUTHENTICATED],
  ];

  for (const [method, request] of METHODS) {
    for (const [what, metadata, code] of credentials) {
      it(`${method} with ${what} is ${grpc.status[code]}, with nothing written`, async () => {
        await expectNothingWritten(async () => {
          const error = await expectStatus(admin.call(method, request(), metadata()), code);
          assert.doesNotMatch(error.details, /acme|intruder|slk_/, 'the answer reveals nothing');
        });
      });
    }
  }

  it('is refused before the request is looked at', async () => {
    await expectNothingWritten(async () => {
      // Requests that would be INVALID_ARGUMENT or NOT_FOUND for an admin.
      await expectStatus(
        admin.call('CreateTenant', { tenant_id: 'Not Valid' }, bearer(tenantKey)),
        grpc.status.PERMISSION_DENIED,
      );
      await expectStatus(
        admin.call('RevokeApiKey', { key_id: 'nope' }, new grpc.Metadata()),
        grpc.status.UNAUTHENTICATED,
      );
      // The tenant's own key: still not theirs to revoke.
      await expectStatus(
        admin.call('RevokeApiKey', { key_id: acmeKeyId }, bearer(tenantKey)),
        grpc.status.PERMISSION_DENIED,
      );
    });
    await fx.client(tenantKey).listTasks({}); // the tenant key still works on TaskService
  });
});

describe('bad requests from an admin change nothing', () => {
  const invalid: readonly [method: string, request: object, field: string][] = [
    ['CreateTenant', { tenant_id: '' }, 'tenant_id'],
    ['CreateTenant', { tenant_id: 'Upper' }, 'tenant_id'],
    ['CreateTenant', { tenant_id: 'a.b' }, 'tenant_id'],
    ['CreateTenant', { tenant_id: '-leading-dash' }, 'tenant_id'],
    ['CreateTenant', { tenant_id: 'x'.repeat(65) }, 'tenant_id'],
    ['CreateTenant', { tenant_id: 'fine', display_name: 'x'.repeat(201) }, 'display_name'],
    ['CreateTenant', { tenant_id: 'fine', display_name: 'line\nbreak' }, 'display_name'],
    ['ListTenants', { page_size: -1 }, 'page_size'],
    ['ListTenants', { page_token: 'garbage' }, 'page_token'],
    [
      'ListTenants',
      { page_token: Buffer.from('tenants.v1:Bad Id').toString('base64url') },
      'page_token',
    ],
    ['CreateApiKey', { tenant_id: '' }, 'tenant_id'],
    ['CreateApiKey', { tenant_id: 'acme*', admin: true }, 'tenant_id'],
    ['ListApiKeys', { tenant_id: '' }, 'tenant_id'],
    ['ListApiKeys', { tenant_id: 'a b' }, 'tenant_id'],
    ['RevokeApiKey', { key_id: '' }, 'key_id'],
    ['RevokeApiKey', { key_id: 'not-a-uuid' }, 'key_id'],
    ['RevokeApiKey', { key_id: `${randomUUID()}x` }, 'key_id'],
  ];
  for (const [method, request, field] of invalid) {
    it(`${method} ${JSON.stringify(request).slice(0, 60)} is INVALID_ARGUMENT naming ${field}`, async () => {
      await expectNothingWritten(async () => {
        await expectInvalidField(asAdmin(method, request), field);
      });
    });
  }

  it('a display name of exactly 200 characters is accepted', async () => {
    const { tenant } = await asAdmin<CreateTenantResponse>('CreateTenant', {
      tenant_id: 'long-name',
      display_name: 'é'.repeat(200),
    });
    assert.equal(tenant.display_name, 'é'.repeat(200));
  });

  const missing: readonly [method: string, request: () => object][] = [
    ['CreateApiKey', () => ({ tenant_id: 'nobody', admin: true })],
    ['ListApiKeys', () => ({ tenant_id: 'nobody' })],
    ['RevokeApiKey', () => ({ key_id: randomUUID() })],
  ];
  for (const [method, request] of missing) {
    it(`${method} of something that does not exist is NOT_FOUND`, async () => {
      await expectNothingWritten(async () => {
        await expectStatus(asAdmin(method, request()), grpc.status.NOT_FOUND);
      });
    });
  }
});

describe('a redrive racing a retry of its task', () => {
  /** A FAILED_TERMINAL task of `acme` with `letters` open dead letters of its step. */
  async function deadLetteredTask(letters: number): Promise<{ taskId: string; ids: string[] }> {
    const { task } = await fx.client(tenantKey).createTask({
      type: TYPE,
      priority: 'PRIORITY_P2',
      input: INPUT,
    });
    const taskId = task.task_id;
    await fx.database.sql`
      update tasks set status = 'failed_terminal', finished_at = now() where id = ${taskId}`;
    await fx.database.sql`update task_steps set status = 'failed' where task_id = ${taskId}`;
    const ids: string[] = [];
    for (let i = 0; i < letters; i++) {
      ids.push(
        await insertDeadLetter(fx.database.db, {
          taskId,
          tenantId: 'acme',
          step: 'outline',
          stepSeq: 1,
          reason: 'attempts_exhausted',
          error: { errorClass: 'external_5xx', message: 'HTTP 503', retryable: true },
          attempts: 3,
        }),
      );
    }
    return { taskId, ids };
  }

  /** Waits until `count` sessions of the database wait for a lock. */
  async function lockWaiters(count: number): Promise<void> {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const [row] = await fx.database.sql<[{ n: number }]>`
        select count(*)::int as n from pg_stat_activity
        where datname = current_database() and wait_event_type = 'Lock'`;
      if (row.n >= count) return;
      assert.ok(Date.now() < deadline, `${count} sessions never waited for a lock`);
      await delay(10);
    }
  }

  /**
   * Starts `first`, then `second`, each once the one before waits for the task's row (held here),
   * then lets them go in that order; settles both.
   */
  async function inOrderBehindTask(
    taskId: string,
    first: () => Promise<unknown>,
    second: () => Promise<unknown>,
  ): Promise<PromiseSettledResult<unknown>[]> {
    let calls: Promise<PromiseSettledResult<unknown>[]> | undefined;
    await fx.database.sql.begin(async (sql) => {
      await sql`select 1 from tasks where id = ${taskId} for update`;
      const a = first();
      await lockWaiters(1);
      const b = second();
      await lockWaiters(2);
      calls = Promise.allSettled([a, b]);
    });
    assert.ok(calls);
    return calls;
  }

  function redrive(ids: string[]): Promise<RedriveDeadLettersResponse> {
    return asAdmin<RedriveDeadLettersResponse>('RedriveDeadLetters', { dead_letter_ids: ids });
  }

  it('a RetryTask first: the redrive is refused as already redriven', async () => {
    const { taskId, ids } = await deadLetteredTask(1);
    const [retried, redriven] = await inOrderBehindTask(
      taskId,
      () => fx.client(tenantKey).retryTask(taskId),
      () => redrive(ids),
    );
    assert.equal(retried?.status, 'fulfilled', 'RetryTask retried the task');
    assert.deepEqual(redriven, {
      status: 'fulfilled',
      value: {
        results: [
          { dead_letter_id: ids[0], task_id: taskId, redriven: false, reason: 'already redriven' },
        ],
      },
    });
  });

  it('two letters of one task redriven at once: one retries it, the other is refused', async () => {
    const { taskId, ids } = await deadLetteredTask(2);
    const [a, b] = ids as [string, string];
    const [first, second] = await inOrderBehindTask(
      taskId,
      () => redrive([a]),
      () => redrive([b]),
    );
    assert.deepEqual(first, {
      status: 'fulfilled',
      value: { results: [{ dead_letter_id: a, task_id: taskId, redriven: true, reason: '' }] },
    });
    assert.deepEqual(second, {
      status: 'fulfilled',
      value: {
        results: [
          { dead_letter_id: b, task_id: taskId, redriven: false, reason: 'already redriven' },
        ],
      },
    });
    const { task } = await fx.client(tenantKey).getTask(taskId);
    assert.equal(task.attempt, 2, 'retried once');
  });

  it('names each letter as requested, once, also in capitals', async () => {
    const { taskId, ids } = await deadLetteredTask(1);
    const [id] = ids as [string];
    const unknown = randomUUID().toUpperCase();
    const { results } = await redrive([id.toUpperCase(), unknown, id, unknown.toLowerCase()]);
    assert.deepEqual(results, [
      { dead_letter_id: id.toUpperCase(), task_id: taskId, redriven: true, reason: '' },
      { dead_letter_id: unknown, task_id: '', redriven: false, reason: 'dead letter not found' },
    ]);
  });

  it('a purge names each letter deleted as requested, once, also in capitals', async () => {
    const { ids } = await deadLetteredTask(2);
    const [a, b] = ids as [string, string];
    const unknown = randomUUID().toUpperCase();
    const { purged_ids: purged } = await asAdmin<PurgeDeadLettersResponse>('PurgeDeadLetters', {
      dead_letter_ids: [a.toUpperCase(), unknown, b, a],
    });
    assert.deepEqual(purged, [a.toUpperCase(), b]);
  });
});

describe('secrets', () => {
  it('never reach the logs, while the admin actions are logged', () => {
    // Keys made before this point were created, listed and revoked; the log must have seen that.
    const text = logLines.join('\n');
    assert.match(text, /"msg":"API key created"/, 'the gateway logged key creations');
    assert.match(text, /"msg":"API key revoked"/, 'the gateway logged revocations');
    assert.match(text, /"msg":"tenant created"/, 'the gateway logged tenant creations');
    assert.ok(secrets.length >= 10, 'the test saw many secrets');
    for (const secret of secrets) {
      assert.ok(!text.includes(secret), `a secret (${secret.slice(0, 10)}…) is in the logs`);
      assert.ok(!text.includes(secret.slice(10)), 'no part of a secret past its prefix either');
    }
  });

  it('are stored only as hashes', async () => {
    const rows = await fx.database.sql`select key_hash, key_prefix from api_keys`;
    const stored = JSON.stringify(rows);
    for (const secret of secrets) assert.ok(!stored.includes(secret));
  });

  it('are listed by prefix only', async () => {
    const { keys } = await asAdmin<ListApiKeysResponse>('ListApiKeys', { tenant_id: 'ops' });
    assert.ok(keys.length >= 3);
    assert.ok(keys.every((k: ApiKey) => /^slk_.{6}$/.test(k.prefix)));
  });
});
