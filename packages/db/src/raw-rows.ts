/**
 * Rows of hand-written statements read as drizzle reads its own: a statement drizzle cannot build
 * (a data-modifying CTE, say) returns raw columns, which this maps to the table's record type with
 * each column's own decoding (timestamps to `Date`, numeric modes, JSON).
 */
import { getTableColumns, type InferSelectModel, type Table } from 'drizzle-orm';

/**
 * The record of `table` in `raw`, a row with every column of the table under its SQL name (as
 * `select *` or `returning *` give it).
 *
 * @throws Error when a column is missing: a statement that does not return the whole row is a bug.
 */
export function recordOf<T extends Table>(
  table: T,
  raw: Readonly<Record<string, unknown>>,
): InferSelectModel<T> {
  const record: Record<string, unknown> = {};
  for (const [field, column] of Object.entries(getTableColumns(table))) {
    if (!(column.name in raw)) throw new Error(`row without column ${column.name}`);
    const value = raw[column.name];
    record[field] = value === null ? null : column.mapFromDriverValue(value);
  }
  return record as InferSelectModel<T>;
}
