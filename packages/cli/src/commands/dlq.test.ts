import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ListDeadLettersRequest } from '@sluice/api';
import type { AdminClient } from '@sluice/sdk/client';
import { runCli, type CliEnvironment } from '../main.js';

/** Runs `sluice argv` against an admin client that records its ListDeadLetters requests. */
async function run(argv: string[]) {
  const requests: Partial<ListDeadLettersRequest>[] = [];
  const lines: string[] = [];
  const client = {
    listDeadLetters: (request: Partial<ListDeadLettersRequest>) => {
      requests.push(request);
      return Promise.resolve({ dead_letters: [], next_page_token: '' });
    },
    close: () => undefined,
  } as unknown as AdminClient;
  const environment: Partial<CliEnvironment> = {
    env: { SLUICE_API_KEY: 'sk_admin' },
    output: { out: (line) => lines.push(line), err: (line) => lines.push(line) },
    signal: new AbortController().signal,
    createAdminClient: () => client,
  };
  const code = await runCli(argv, environment);
  return { code, requests, text: lines.join('\n') };
}

describe('sluice dlq list', () => {
  it('asks for a page the API can carry whatever --limit says', async () => {
    // page_size is an int32 on the wire: 4294967297 went as 1, 3000000000 as a negative size the
    // gateway refused ("page_size must not be negative").
    for (const limit of ['4294967297', '3000000000']) {
      const { code, requests } = await run(['dlq', 'list', '--limit', limit]);
      assert.equal(code, 0);
      assert.equal(requests[0]?.page_size, 2 ** 31 - 1, `--limit ${limit}`);
    }
    assert.equal((await run(['dlq', 'list', '--limit', '20'])).requests[0]?.page_size, 20);
  });
});
