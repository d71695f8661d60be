/**
 * Rows of hand-written statements read as drizzle reads its own: a statement drizzle cannot build
 * (a data-modifying CTE, say) returns raw columns, which this maps to the table's record type with
 * each column's own decoding (timestamps to `Date`, numeric modes, JSON).
 */
import { getTableColumns, sql, type InferSelectModel, type SQL, type Table } from 'drizzle-orm';

/**
 * The record of `table` in `raw`, a row with every column of the table under its SQL name (as
 * `select *` or `returning *` give it), or under `prefix` + its name (as {@link prefixedColumns}
 * gives it, for a row that holds the records of several tables).
 *
 * @throws Error when a column is missing: a statement that does not return the whole row is a bug.
 */
export function recordOf<T extends Table>(
  table: T,
  raw: Readonly<Record<string, unknown>>,
  prefix = '',
): InferSelectModel<T> {
  const record: Record<string, unknown> = {};
  for (const [field, column] of Object.entries(getTableColumns(table))) {
    const name = prefix + column.name;
    if (!(name in raw)) throw new Error(`row without column ${name}`);
    const value = raw[name];
    record[field] = value === null ? null : column.mapFromDriverValue(value);
  }
  return record as InferSelectModel<T>;
}

/**
 * A select list of every column of `table` read from the row source `alias`, each named
 * `<prefix><column>` (`prefix` defaults to `<alias>.`), for {@link recordOf} with that prefix.
 * One raw chunk of SQL (the names come from the schema, not from input): build it once, at module
 * load, and the statements that embed it cost the query builder nothing per column.
 */
export function prefixedColumns(table: Table, alias: string, prefix = `${alias}.`): SQL {
  const quote = (name: string) => `"${name.replaceAll('"', '""')}"`;
  const columns = Object.values(getTableColumns(table)).map(
    (column) => `${quote(alias)}.${quote(column.name)} as ${quote(prefix + column.name)}`,
  );
  return sql.raw(columns.join(', '));
}
