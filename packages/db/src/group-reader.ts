/**
 * Grouped lookups: keys asked for while an earlier read is on its way wait for it, then are read
 * together in one statement, each distinct key once. An idle reader reads a key at once. Unlike a
 * cache, or joining a read already under way, every answer comes from a read that started after
 * it was asked for, so it sees every change committed before the call (a revoked API key is
 * refused from the next call on). The gateway reads API keys and task types this way.
 */
import { GroupWriter, MAX_ITEMS_PER_WRITE } from './group-writer.js';

/** Reads the given distinct keys in one statement: the value of each key found, by key. */
export type GroupRead<Value> = (keys: string[]) => Promise<ReadonlyMap<string, Value>>;

/** Reads keys, gathering those asked for while a read is in flight. */
export class GroupReader<Value> {
  private readonly group: GroupWriter<string, Value | undefined>;

  constructor(read: GroupRead<Value>, maxPerRead = MAX_ITEMS_PER_WRITE) {
    this.group = new GroupWriter(async (keys: string[]) => {
      const found = await read([...new Set(keys)]);
      return keys.map((key) => found.get(key));
    }, maxPerRead);
  }

  /** The value of `key`, `undefined` when the read found none; rejects when the read failed. */
  read(key: string): Promise<Value | undefined> {
    return this.group.write(key);
  }
}
