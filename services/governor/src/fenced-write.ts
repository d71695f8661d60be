/**
 * Writing the decision document to KV without ever overwriting a newer leader's.
 *
 * The lease alone cannot guarantee one writer: a leader paused past its lease (GC, a frozen VM)
 * wakes up still believing it leads. So every write is a read-compare-write on the key's revision:
 * read the current document, refuse if it carries a greater epoch than ours, and write with a
 * compare-and-set on the revision we read, so nothing can slip in between the check and the write.
 */
import { JetStreamApiError } from '@nats-io/jetstream';
import type { KV } from '@nats-io/kv';
import { DECISIONS_KEY, decodeDecision, encodeDecision } from '@sluice/bus';
import type { GovernorDecision } from '@sluice/bus';

/** What the key held before a write. */
export type PreviousDecision =
  /** Nothing (never written, deleted, or lost with JetStream's store). */
  | { readonly type: 'none' }
  | { readonly type: 'decision'; readonly decision: GovernorDecision }
  /** Something that does not decode as a decision; it is overwritten. */
  | { readonly type: 'invalid'; readonly error: unknown };

/** The outcome of {@link writeDecisionFenced}. */
export type FencedWriteOutcome =
  | { readonly type: 'written'; readonly revision: number; readonly previous: PreviousDecision }
  /** A governor with a greater epoch wrote the key: we are deposed and must stop acting. */
  | { readonly type: 'deposed'; readonly current: GovernorDecision }
  /** The key changed between our read and our write; nothing was written. Try again. */
  | { readonly type: 'conflict' };

const WRONG_LAST_SEQUENCE = 10071;
const WRONG_LAST_SEQUENCE_UNKNOWN = 10164;

function isCasFailure(err: unknown): boolean {
  return (
    err instanceof JetStreamApiError &&
    (err.code === WRONG_LAST_SEQUENCE || err.code === WRONG_LAST_SEQUENCE_UNKNOWN)
  );
}

/**
 * Writes `decision` under {@link DECISIONS_KEY} unless the key holds a decision of a greater epoch.
 * An equal epoch is our own earlier write (epochs are unique per tenure) and is replaced.
 *
 * @throws SluiceError `invalid_argument` when `decision` itself is malformed; the client's error
 *   when NATS does not answer.
 */
export async function writeDecisionFenced(
  kv: KV,
  decision: GovernorDecision,
): Promise<FencedWriteOutcome> {
  const payload = encodeDecision(decision);
  const entry = await kv.get(DECISIONS_KEY);
  const previous = previousOf(entry === null || entry.operation !== 'PUT' ? null : entry.value);
  if (previous.type === 'decision' && previous.decision.epoch > decision.epoch) {
    return { type: 'deposed', current: previous.decision };
  }
  try {
    // `create` succeeds only on an absent or deleted key; `update` only on the revision we read.
    const revision =
      entry === null
        ? await kv.create(DECISIONS_KEY, payload)
        : await kv.update(DECISIONS_KEY, payload, entry.revision);
    return { type: 'written', revision, previous };
  } catch (err) {
    if (isCasFailure(err)) return { type: 'conflict' };
    throw err;
  }
}

function previousOf(value: Uint8Array | null): PreviousDecision {
  if (value === null) return { type: 'none' };
  try {
    return { type: 'decision', decision: decodeDecision(value) };
  } catch (error) {
    return { type: 'invalid', error };
  }
}
