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
 * on a small table; see table-statistics.ts). The statement text varies with the number of ids.
 */
export function idList(ids: readonly (number | string)[]): SQL {
  return sql`(${sql.join(
    ids.map((id) => sql`${id}`),
    sql`, `,
  )})`;
}
