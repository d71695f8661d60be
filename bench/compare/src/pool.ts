/** Running many async calls with a bound on how many are in flight. */

/**
 * Calls `work` for every item, at most `inFlight` at once, and resolves once all did; the first
 * failure rejects (the calls already started still finish).
 */
export async function forEachBounded<T>(
  items: readonly T[],
  inFlight: number,
  work: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  const lane = async () => {
    while (next < items.length) {
      const item = items[next] as T;
      next += 1;
      await work(item);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(inFlight, items.length)) }, lane));
}

/** `items` in consecutive slices of at most `size`. */
export function chunks<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}
