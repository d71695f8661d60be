/**
 * A create checked against what the gateway remembers (the caller's API key, the task type's
 * latest version) instead of reading both again: its insert confirms them in the same statement
 * and refuses to write anything when one changed, so a revoked key or a newly registered version
 * is still seen from the next call on, without a read of its own before the write.
 */
import { sql, type SQL } from 'drizzle-orm';
import { textArrayOf } from './batch-input.js';

/** A task type's latest version as a create was checked against it. */
export interface RememberedType {
  readonly name: string;
  readonly version: number;
  /**
   * `registered_at` as Postgres printed it (microseconds, unlike a `Date`): registering the same
   * version again replaces its contents and moves this on.
   */
  readonly registeredStamp: string;
}

/** What creates written together were checked with, for their insert to confirm. */
export interface RememberedReads {
  /** Hashes of the API keys the creates came with; each must still belong to the tenant. */
  readonly keyHashes: readonly string[];
  /** Each must still be its type's latest version, registered when remembered. */
  readonly types: readonly RememberedType[];
}

/** Says that nothing was written: something the creates were checked with changed. */
export class StaleReads extends Error {
  constructor() {
    super('an API key or task type changed since the gateway read it; nothing was written');
    this.name = 'StaleReads';
  }
}

/**
 * A query that yields no row while `reads` still hold for `tenantId`, and otherwise fails its
 * statement (`sluice_refuse_commit`). Put in a materialized CTE that the insert's rows depend on:
 * the check then runs in the insert's snapshot, before anything is written.
 */
export function rememberedReadsGuard(tenantId: string, reads: RememberedReads): SQL {
  const hashes = [...new Set(reads.keyHashes)];
  return sql`
    select sluice_refuse_commit('an API key or task type changed since the gateway read it')
    where (select count(*) from api_keys
           where key_hash = any(${textArrayOf(hashes)}) and tenant_id = ${tenantId}
             and revoked_at is null) <> ${hashes.length}
       or exists (
         select 1
         from jsonb_to_recordset(${JSON.stringify(reads.types)}::jsonb)
           as r(name text, version integer, "registeredStamp" text)
         where not exists (select 1 from task_types t
                           where t.name = r.name and t.version = r.version
                             and t.registered_at = r."registeredStamp"::timestamptz)
            or exists (select 1 from task_types t
                       where t.name = r.name and t.version > r.version))`;
}
