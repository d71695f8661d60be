/**
 * The demo's check that no other Sluice stack works on its database. The ready queue is the
 * database: the schedulers of every stack connected to it claim each other's steps, whatever their
 * prefix, and the other stack's executors would then run the demo's steps with their own LLM
 * settings (an `npm start` without SLUICE_LLM_BASE_URL fails them). Better to say so up front than
 * to show a batch that fails for no visible reason.
 */
import type { DatabaseHandle } from '@sluice/db';

/** The application name of the demo's own connections, which the check leaves out. */
export const DEMO_APPLICATION_NAME = 'sluice-demo';

/**
 * The services of other stacks connected to the database (`sluice-scheduler`,
 * `sluice-executor-llm` …) with their connection counts; empty when there are none.
 */
export async function otherServicesConnected(
  database: DatabaseHandle,
): Promise<Map<string, number>> {
  const rows = await database.sql<{ application_name: string; connections: number }[]>`
    select application_name, count(*)::int as connections
    from pg_stat_activity
    where datname = current_database()
      and application_name like 'sluice-%'
      and application_name <> ${DEMO_APPLICATION_NAME}
    group by application_name
    order by application_name`;
  return new Map(rows.map((row) => [row.application_name, row.connections]));
}

/** The message for {@link otherServicesConnected}'s answer, or `undefined` when it is empty. */
export function otherStackProblem(services: ReadonlyMap<string, number>): string | undefined {
  if (services.size === 0) return undefined;
  const list = [...services.keys()].join(', ');
  return (
    `another Sluice stack is using this database (${list} connected): its services would take ` +
    'over some of the demo’s steps. Stop it (e.g. the running `npm start`) or point DATABASE_URL ' +
    'at another database, and run the demo again.'
  );
}
