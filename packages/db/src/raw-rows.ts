/**
 * Rows of hand-written statements read as drizzle reads its own: a statement drizzle cannot build
 * (a data-modifying CTE, say) returns raw columns, which this maps to the table's record type with
 * each column's own decoding (timestamps to `Date`, numeric modes, JSON).
 */
import {
  getTableColumns,
  sql,
  type Column,
  type InferSelectModel,
  type SQL,
  type Table,
} from 'drizzle-orm';

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
  for (const { field, name, column } of readersOf(table, prefix)) {
    if (!(name in raw)) throw new Error(`row without column ${name}`);
    const value = raw[name];
    record[field] = value === null ? null : column.mapFromDriverValue(value);
  }
  return record as InferSelectModel<T>;
}

/** How one column of a record is read from a raw row. */
interface ColumnReader {
  readonly field: string;
  /** The column's name in the raw row (with the prefix). */
  readonly name: string;
  readonly column: Column;
}

/**
 * The readers of a table's columns under a prefix, worked out once: rows are read on the hot paths
 * (every step start), and listing a table's columns allocates a new object each time.
 */
const readers = new WeakMap<Table, Map<string, readonly ColumnReader[]>>();

function readersOf(table: Table, prefix: string): readonly ColumnReader[] {
  let byPrefix = readers.get(table);
  if (!byPrefix) readers.set(table, (byPrefix = new Map<string, readonly ColumnReader[]>()));
  let list = byPrefix.get(prefix);
  if (!list) {
    list = Object.entries(getTableColumns(table)).map(([field, column]) => ({
      field,
      name: prefix + column.name,
      column,
    }));
    byPrefix.set(prefix, list);
  }
  return list;
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
