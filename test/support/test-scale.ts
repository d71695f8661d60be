/**
 * How much work the fault scenarios push through: `SLUICE_TEST_SCALE` tasks per scenario when set
 * (`npm run test:chaos` sets 1,000), else a count that keeps `npm test` within its time budget.
 */

/** Tasks per scenario under `npm test`. */
export const DEFAULT_TEST_SCALE = 120;

/**
 * Tasks per scenario.
 *
 * @throws Error when SLUICE_TEST_SCALE is set to something that is not a whole number ≥ 1.
 */
export function testScale(): number {
  const raw = process.env.SLUICE_TEST_SCALE;
  if (raw === undefined || raw === '') return DEFAULT_TEST_SCALE;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1) {
    throw new Error(`SLUICE_TEST_SCALE must be a whole number ≥ 1, got ${JSON.stringify(raw)}`);
  }
  return value;
}
