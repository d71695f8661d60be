import { randomBytes } from 'node:crypto';

/** Longest prefix `prefixProblem` in @sluice/core accepts. */
const MAX_PREFIX_LENGTH = 32;
/** 40 random bits in base 36: collisions stay negligible across every test of many runs. */
const RANDOM_LENGTH = 8;
const LABEL_ROOM = MAX_PREFIX_LENGTH - 't__'.length - RANDOM_LENGTH;

/**
 * A prefix for the subjects, streams, consumers and KV buckets of one test, different on every call,
 * so tests running at the same time against one server never share a name (work-queue streams may
 * not even overlap in subjects).
 *
 * The result is `t_<label>_<random>`, valid for `prefixProblem` (`^[a-z][a-z0-9_]{0,31}$`): the label
 * is lower-cased, other characters become `_`, and it is cut short to fit.
 * @param label a hint for humans reading the server's state, e.g. the test file's subject
 */
export function uniquePrefix(label = ''): string {
  const random = randomBytes(5).readUIntBE(0, 5).toString(36).padStart(RANDOM_LENGTH, '0');
  const cleaned = label
    .toLowerCase()
    .replace(/[^a-z0-9_]+/g, '_')
    .slice(0, LABEL_ROOM);
  return cleaned === '' ? `t_${random}` : `t_${cleaned}_${random}`;
}
