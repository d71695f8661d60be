/**
 * Pieces shared by the batch statements that take their rows as one JSON parameter
 * (`with input as (select * from jsonb_to_recordset($1::jsonb) as i(…))`): the executor's group
 * start and group commit, the scheduler's batched transitions, and batch creation's key lookups.
 */
import { sql, type SQL } from 'drizzle-orm';

/**
 * The task ids of the `input` rows, for `where id = any(${inputTaskIds})` on `tasks`.
 *
 * Why not a join or `in (select task_id from input)`: Postgres estimates any set-returning function
 * at 100 rows, so such a join looks like 100 index probes, and on a `tasks` table of a few
 * thousand rows (a young deployment, a benchmark) the planner reads the whole table instead — a
 * sequential scan per statement, ~1 ms at 3,000 tasks and growing with the table, seen in
 * `auto_explain` on every group start, group commit and batched transition of a drain. An array
 * built by an init plan is estimated at 10 elements, so the planner probes the primary key.
 */
export const inputTaskIds = sql`array(select task_id from input)`;

/**
 * `values` as a `text[]` for `= any(…)`, passed as one JSON parameter. Built by an init plan, like
 * {@link inputTaskIds} it is estimated at 10 elements, so the planner probes an index on the
 * column compared (idempotency keys: the (tenant, key) indexes).
 */
export function textArrayOf(values: readonly string[]): SQL {
  return sql`array(select jsonb_array_elements_text(${JSON.stringify(values)}::jsonb))`;
}

/**
 * Ids as a parenthesised list of parameters, for `where id in ${idList(ids)}`: the planner counts
 * as many rows as ids, so a plan made for one id on an empty table still probes the primary key
 * once the table is large (an array, estimated at 10, is read by a sequential scan in a plan made
 * on a small table; see table-statistics.ts).
 *
 * The list is padded to a power of two by repeating its last id (`in` ignores repeats): the
 * statement text varies with the length, and each text is a prepared statement Postgres plans
 * anew for its first executions on a connection. Exact lengths made some twenty texts of the
 * relay's and the outcome pass's marks, nearly every one planned each time it ran (issue 7,
 * pg_stat_statements); padded, a batch of up to 64 ids has seven. Lists longer than
 * {@link PADDED_UP_TO} go as they are (Postgres takes at most 65,535 parameters a statement).
 */
/** The longest id list {@link idList} pads. */
export const PADDED_UP_TO = 1024;

export function idList(ids: readonly (number | string)[]): SQL {
  const last = ids.at(-1);
  if (last === undefined) throw new RangeError('idList needs at least one id');
  const padded = [...ids];
  if (ids.length <= PADDED_UP_TO) while (!isPowerOfTwo(padded.length)) padded.push(last);
  return sql`(${sql.join(
    padded.map((id) => sql`${id}`),
    sql`, `,
  )})`;
}

function isPowerOfTwo(n: number): boolean {
  return n > 0 && (n & (n - 1)) === 0;
}

/**
 * A row limit written into the statement rather than passed as a parameter. A statement whose only
 * parameter is its `limit` is planned anew at almost every execution: its generic plan, made
 * without the value, assumes a larger limit and so looks costlier than the custom plans Postgres
 * tries first, and it keeps choosing those (the outcome pass's lock, 841 plans in 1,218 calls in a
 * drain; issue 7, pg_stat_statements). Without a parameter the plan is made once per connection.
 * Only for limits the code sets (batch sizes from configuration), never for a caller's value.
 *
 * @throws RangeError unless `limit` is a positive safe integer.
 */
export function literalLimit(limit: number): SQL {
  if (!Number.isSafeInteger(limit) || limit < 1) {
    throw new RangeError(`a row limit must be a positive integer, not ${String(limit)}`);
  }
  return sql.raw(String(limit));
}
