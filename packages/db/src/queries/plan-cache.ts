/**
 * Prepared statements whose plan Postgres should make once per connection.
 *
 * Postgres plans a prepared statement's first five executions for their parameter values, then
 * keeps planning each execution that way as long as the generic plan (made without the values)
 * looks costlier than those custom plans did — for some statements, every execution. The claim is
 * such a statement: 2.6 ms of planning per call against 2.3 ms of execution in a drain of 20,000
 * (pg_stat_statements with track_planning, issue 7), on every claim the dispatcher makes, and its
 * generic plan serves every parameter value alike (its limits and lists are read at run time).
 */
import { sql, type SQL } from 'drizzle-orm';

/**
 * The statement that has the rest of its transaction run on generic plans: made on a statement's
 * first execution on a connection, kept while nothing invalidates them. Goes first in the
 * transaction; `local`, so it ends with it and the pooled connection's other statements are
 * planned as before.
 */
export function genericPlansForTransaction(): SQL {
  return sql`set local plan_cache_mode = force_generic_plan`;
}
