/**
 * The governor's role in `leader_epochs` (see `advanceLeaderEpoch` in `@sluice/db`): its epoch is
 * the fencing token every decision it writes carries.
 */

/** The `leader_epochs` role of the governor. */
export const GOVERNOR_ROLE = 'governor';
