/**
 * The setup every end-to-end test shares: a fresh database from the migrated template, one tenant
 * with an API key, the whole stack (test/support/stack.ts) on a unique prefix, and a gRPC client
 * of that tenant. What a test needs besides (fake servers, task modules, more tenants) it sets up
 * itself around this.
 *
 * The tenant key it creates is registered in test/support/secrets.ts (so is the LLM key, by the
 * stack): stopping fails when a service printed one. Keys a test makes itself are found by their
 * shape; {@link E2eStack.createApiKey} also registers them by name.
 */
import { natsUrl, uniquePrefix } from '@sluice/bus/testing';
import {
  createApiKey,
  createTenant,
  migrateDatabase,
  openDatabase,
  type DatabaseHandle,
} from '@sluice/db';
import { createTestDatabase, migratedTemplate, type TestDatabase } from '@sluice/db/testing';
import { createTaskClient, type TaskClient } from '@sluice/sdk/client';
import { registerSecret } from './secrets.js';
import { startStack, type Stack, type StackOptions } from './stack.js';

/**
 * An endpoint where nothing answers (the discard port), for task types none of whose steps call a
 * model.
 */
const NO_LLM_BASE_URL = 'http://127.0.0.1:9/v1';

/** What differs between the end-to-end tests' stacks. */
export interface E2eStackOptions extends Pick<StackOptions, 'llmApiKey' | 'resources' | 'echo'> {
  /** Names the run's NATS prefix (`uniquePrefix(label)`), so that leftovers say whose they are. */
  readonly label: string;
  /** The tenant the API key and the client belong to (default `acme`). */
  readonly tenantId?: string;
  /** Connections of the test's own database pool (default 2). */
  readonly maxConnections?: number;
  /** The OpenAI-compatible endpoint the `llm` steps call (default: one where nothing answers). */
  readonly llmBaseUrl?: string;
  /** Extra environment for every service (see {@link StackOptions.env}). */
  readonly env?: Record<string, string>;
}

/** A running end-to-end stack and what a test reaches it with. */
export interface E2eStack {
  /** The fresh database the services use. */
  readonly database: TestDatabase;
  /** The test's own connection to it (to read rows, create more tenants …). */
  readonly handle: DatabaseHandle;
  readonly tenantId: string;
  /** The tenant's API key; {@link client} sends it. */
  readonly apiKey: string;
  /** The NATS prefix of the run. */
  readonly prefix: string;
  readonly stack: Stack;
  readonly client: TaskClient;
  /** Creates another API key (of an existing tenant) and registers it as a secret. */
  createApiKey(options: { tenantId: string; isAdmin?: boolean }): Promise<string>;
  /**
   * Closes the client, stops the services (deleting the prefix's streams and buckets), closes
   * the handle and drops the database; resolves with the services' exit codes by name.
   *
   * @throws SecretLeakError when a service printed a secret (after all of that is done).
   */
  stop(): Promise<Record<string, number | null>>;
  [Symbol.asyncDispose](): Promise<void>;
}

/**
 * Creates the database and tenant, starts the stack and connects a client. When a part fails to
 * start, what already runs is stopped again before the error is thrown.
 */
export async function startE2eStack(options: E2eStackOptions): Promise<E2eStack> {
  const tenantId = options.tenantId ?? 'acme';
  const database = await createTestDatabase({ template: await migratedTemplate(migrateDatabase) });
  const handle = openDatabase(database.url, { max: options.maxConnections ?? 2 });
  let stack: Stack | undefined;
  try {
    await createTenant(handle.db, { id: tenantId });
    const apiKey = await createApiKey(handle.db, { tenantId });
    registerSecret(apiKey, `API key of tenant ${tenantId}`);
    const prefix = uniquePrefix(options.label);
    const running = await startStack({
      natsUrl: natsUrl(),
      databaseUrl: database.url,
      prefix,
      llmBaseUrl: options.llmBaseUrl ?? NO_LLM_BASE_URL,
      llmApiKey: options.llmApiKey,
      resources: options.resources,
      env: options.env,
      echo: options.echo,
    });
    stack = running;
    const client = createTaskClient({ address: running.grpcAddress, apiKey });
    const stop = async () => {
      client.close();
      try {
        return await running.stop();
      } finally {
        await handle.close();
        await database.drop();
      }
    };
    return {
      database,
      handle,
      tenantId,
      apiKey,
      prefix,
      stack: running,
      client,
      async createApiKey(keyOptions) {
        const key = await createApiKey(handle.db, keyOptions);
        registerSecret(
          key,
          `${keyOptions.isAdmin === true ? 'admin ' : ''}API key of tenant ${keyOptions.tenantId}`,
        );
        return key;
      },
      stop,
      async [Symbol.asyncDispose]() {
        await stop();
      },
    };
  } catch (error) {
    await stack?.stop().catch(() => undefined);
    await handle.close();
    await database.drop();
    throw error;
  }
}
