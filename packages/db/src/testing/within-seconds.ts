/**
 * A bound on how long a test waits for a promise that may never settle (a query on a connection
 * that died, a reservation that never comes): its value, or `'too late'` after `seconds`, so the
 * test fails with an assertion instead of hanging until the runner's timeout.
 */
export async function withinSeconds<T>(
  seconds: number,
  promise: Promise<T>,
): Promise<T | 'too late'> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'too late'>((resolve) => {
    timer = setTimeout(() => resolve('too late'), seconds * 1_000);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}
