/**
 * The urgent-wait guard's control: when P0 waits exceed the target it caps the lower priorities of
 * that resource (a cut scaled by the overshoot, once per drain), raises the cap while waits are
 * within the target, and lifts it when P0 work stops; at P0's onset it cuts the flood at once.
 * Time is passed in; nothing sleeps.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DEFAULT_FLOOR, UrgentWaitGuard, type GuardReading } from './urgent-wait-guard.js';

const TARGET_MS = 50;

/** A reading: P0 waits and P1–P3 steps in flight by resource, and P0 steps in flight if any. */
function reading(
  waits: Record<string, number[]>,
  lowerInFlight: Record<string, number>,
  urgentInFlight: Record<string, number> = {},
): GuardReading {
  const resources = new Set([...Object.keys(lowerInFlight), ...Object.keys(urgentInFlight)]);
  return {
    waits: Object.entries(waits).flatMap(([resource, list]) =>
      list.map((waitMs) => ({ resource, waitMs })),
    ),
    inFlight: Object.fromEntries(
      [...resources].map((resource) => [
        resource,
        { urgent: urgentInFlight[resource] ?? 0, lower: lowerInFlight[resource] ?? 0 },
      ]),
    ),
  };
}

/** Ten waits whose 90th percentile is `p90` (nine at a tenth of it). */
function waitsAt(p90: number): number[] {
  return [...Array.from({ length: 8 }, () => p90 / 10), p90, p90 * 10];
}

describe('the urgent-wait guard', () => {
  it('leaves lower priorities alone while P0 waits are within the target', () => {
    const guard = new UrgentWaitGuard({ targetMs: TARGET_MS });
    assert.deepEqual(guard.assess(reading({ llm: waitsAt(TARGET_MS) }, { llm: 60 }), 0), []);
    assert.deepEqual(guard.caps(), {});
  });

  it('cuts by how far the wait overshoots, between a quarter and three quarters of what is in flight', () => {
    const guard = new UrgentWaitGuard({ targetMs: TARGET_MS });
    const [cut] = guard.assess(reading({ llm: waitsAt(100) }, { llm: 60 }), 0);
    assert.deepEqual(
      cut,
      { resource: 'llm', cap: 30, previous: undefined, waitMs: 100 },
      '60 × 50/100',
    );
    assert.deepEqual(guard.caps(), { llm: 30 });

    const far = new UrgentWaitGuard({ targetMs: TARGET_MS });
    far.assess(reading({ llm: waitsAt(1_000) }, { llm: 60 }), 0);
    assert.deepEqual(far.caps(), { llm: 15 }, 'at most down to a quarter');

    const near = new UrgentWaitGuard({ targetMs: TARGET_MS });
    near.assess(reading({ llm: waitsAt(55) }, { llm: 60 }), 0);
    assert.deepEqual(near.caps(), { llm: 45 }, 'at least down to three quarters');
  });

  it('does not cut again until the steps in flight came down to the cap', () => {
    const guard = new UrgentWaitGuard({ targetMs: TARGET_MS });
    guard.assess(reading({ llm: waitsAt(100) }, { llm: 60 }), 0);
    assert.deepEqual(guard.assess(reading({ llm: waitsAt(100) }, { llm: 44 }), 250), []);
    assert.deepEqual(guard.caps(), { llm: 30 }, 'the first cut has not taken effect yet');
    guard.assess(reading({ llm: waitsAt(100) }, { llm: 30 }), 500);
    assert.deepEqual(guard.caps(), { llm: 15 }, 'now it has: cut again, from the cap');
  });

  it('never caps below its floor (DEFAULT_FLOOR unless set), even with nothing in flight', () => {
    const guard = new UrgentWaitGuard({ targetMs: TARGET_MS });
    guard.assess(reading({ llm: waitsAt(400) }, {}), 0);
    assert.deepEqual(guard.caps(), { llm: DEFAULT_FLOOR });
  });

  it('with a floor of 0, holds lower priorities while P0 waits too long and lets them back a step at a time', () => {
    const guard = new UrgentWaitGuard({ targetMs: TARGET_MS, floor: 0 });
    guard.assess(reading({ llm: waitsAt(1_000) }, { llm: 3 }, { llm: 4 }), 0);
    assert.deepEqual(guard.caps(), { llm: 0 }, 'a quarter of 3, rounded down: held');
    // Still too long once the held steps finished: stays held.
    assert.deepEqual(guard.assess(reading({ llm: waitsAt(400) }, { llm: 0 }), 250), []);
    // Within the target: one step, then an eighth (at least one) per reading.
    assert.deepEqual(guard.assess(reading({ llm: waitsAt(20) }, { llm: 0 }), 500), [
      { resource: 'llm', cap: 1, previous: 0, waitMs: 20 },
    ]);
    guard.assess(reading({ llm: waitsAt(20) }, { llm: 1 }), 750);
    assert.deepEqual(guard.caps(), { llm: 2 });
  });

  it('with a floor of 0, holds at the onset whatever is in flight, and leaves a resource with nothing in flight alone', () => {
    const guard = new UrgentWaitGuard({ targetMs: TARGET_MS, floor: 0 });
    guard.urgentWorkSeen(0, 'llm');
    assert.deepEqual(guard.assess(reading({}, { llm: 1 }), 10), [
      { resource: 'llm', cap: 0, previous: undefined },
    ]);
    const idle = new UrgentWaitGuard({ targetMs: TARGET_MS, floor: 0 });
    idle.urgentWorkSeen(0, 'llm');
    assert.deepEqual(idle.assess(reading({}, {}), 10), [], 'no flood, no cap');
    assert.deepEqual(idle.caps(), {});
  });

  it('refuses a floor that is not a whole number of steps', () => {
    assert.throws(() => new UrgentWaitGuard({ targetMs: TARGET_MS, floor: -1 }), RangeError);
    assert.throws(() => new UrgentWaitGuard({ targetMs: TARGET_MS, floor: 1.5 }), RangeError);
  });

  it('raises the cap by an eighth (at least one step) while waits are within the target', () => {
    const guard = new UrgentWaitGuard({ targetMs: TARGET_MS });
    guard.assess(reading({ llm: waitsAt(1_000) }, { llm: 64 }), 0);
    assert.deepEqual(guard.caps(), { llm: 16 });
    const [raised] = guard.assess(reading({ llm: waitsAt(20) }, { llm: 16 }), 250);
    assert.deepEqual(raised, { resource: 'llm', cap: 18, previous: 16, waitMs: 20 });
    guard.assess(reading({ llm: waitsAt(20) }, { llm: 18 }), 500);
    assert.deepEqual(guard.caps(), { llm: 20 });
    const small = new UrgentWaitGuard({ targetMs: TARGET_MS });
    small.assess(reading({ llm: waitsAt(400) }, { llm: 4 }), 0);
    small.assess(reading({ llm: waitsAt(10) }, { llm: 2 }), 250);
    assert.deepEqual(small.caps(), { llm: DEFAULT_FLOOR + 1 });
  });

  it('raises a cap only while the flood fills at least half of it, so steady P0 work cannot grow it without bound', () => {
    const guard = new UrgentWaitGuard({ targetMs: TARGET_MS });
    guard.assess(reading({ llm: waitsAt(1_000) }, { llm: 64 }), 0);
    assert.deepEqual(guard.caps(), { llm: 16 });
    // The flood is gone while P0 work goes on within its target, a reading every 250 ms for five
    // minutes: a cap raised at every reading regardless would pass 2^31 (the claim reads it as a
    // Postgres int) within a minute and a safe integer within two.
    for (let at = 250; at <= 300_000; at += 250) {
      guard.assess(reading({ llm: waitsAt(10) }, { llm: 7 }), at);
    }
    assert.deepEqual(guard.caps(), { llm: 16 }, '7 of 16 in flight: under half, not raised');
    guard.assess(reading({ llm: waitsAt(10) }, { llm: 8 }), 300_250);
    assert.deepEqual(guard.caps(), { llm: 18 }, '8 of 16: half in use, raised by an eighth');
  });

  it('keeps the cap through a short lull and lifts it once P0 work has stopped', () => {
    const guard = new UrgentWaitGuard({ targetMs: TARGET_MS, releaseAfterMs: 1_000 });
    guard.assess(reading({ llm: waitsAt(100) }, { llm: 60 }), 0);
    assert.deepEqual(guard.assess(reading({}, { llm: 30 }), 999), [], 'no start for under 1 s');
    assert.deepEqual(guard.caps(), { llm: 30 });
    assert.deepEqual(guard.assess(reading({}, { llm: 30 }), 1_000), [
      { resource: 'llm', cap: undefined, previous: 30 },
    ]);
    assert.deepEqual(guard.caps(), {});
  });

  it('hands a claim the caps of P1–P3 steps, the same object until a reading changes them', () => {
    const guard = new UrgentWaitGuard({ targetMs: TARGET_MS });
    guard.assess(reading({ llm: waitsAt(100) }, { llm: 40 }, { llm: 5 }), 0);
    assert.deepEqual(guard.caps(), { llm: 20 }, 'from the P1–P3 steps in flight, P0 apart');
    const before = guard.caps();
    guard.assess(reading({}, { llm: 30 }, { llm: 9 }), 250);
    assert.equal(guard.caps(), before, 'no change, P0 in flight or not: the same object');
    guard.assess(reading({ llm: waitsAt(10) }, { llm: 20 }, { llm: 9 }), 500);
    assert.deepEqual(guard.caps(), { llm: 22 });
  });

  it('caps each resource by its own P0 waits', () => {
    const guard = new UrgentWaitGuard({ targetMs: TARGET_MS });
    guard.assess(reading({ llm: waitsAt(100), browser: waitsAt(10) }, { llm: 40, browser: 8 }), 0);
    assert.deepEqual(guard.caps(), { llm: 20 });
  });

  it('watches for a while after P0 work was seen, and as long as a cap is in place', () => {
    const guard = new UrgentWaitGuard({ targetMs: TARGET_MS, watchForMs: 2_000 });
    assert.equal(guard.watching(0), false, 'no P0 work seen');
    guard.urgentWorkSeen(1_000, 'llm');
    assert.equal(guard.watching(2_999), true);
    assert.equal(guard.watching(3_000), false);
    guard.assess(reading({ llm: waitsAt(100) }, { llm: 10 }), 3_000);
    assert.equal(guard.watching(10_000), true, 'a cap must be lifted by a reading');
  });

  it('cuts the flood to a quarter at P0’s onset, before any P0 step has started', () => {
    const guard = new UrgentWaitGuard({ targetMs: TARGET_MS });
    assert.equal(guard.urgentWorkSeen(0, 'llm'), true, 'the onset: read at once');
    assert.equal(guard.urgentWorkSeen(5, 'llm'), false, 'noted already');
    assert.deepEqual(guard.assess(reading({}, { llm: 60, browser: 40 }), 10), [
      { resource: 'llm', cap: 15, previous: undefined },
    ]);
    assert.deepEqual(guard.caps(), { llm: 15 }, 'only where P0 work appeared');
    assert.equal(guard.urgentWorkSeen(20, 'llm'), false, 'capped: no onset');
    // Until the flood is down to the cap, slow P0 starts cut no further; quick ones raise it.
    assert.deepEqual(guard.assess(reading({ llm: waitsAt(400) }, { llm: 50 }), 260), []);
    guard.assess(reading({ llm: waitsAt(20) }, { llm: 30 }), 510);
    assert.deepEqual(guard.caps(), { llm: 16 });
  });

  it('cuts at an onset whose first P0 step started within the target; caps no small flood', () => {
    // The gateway's urgent claim makes the first start quick whatever the flood does next.
    const quick = new UrgentWaitGuard({ targetMs: TARGET_MS });
    quick.urgentWorkSeen(0, 'llm');
    assert.deepEqual(quick.assess(reading({ llm: waitsAt(20) }, { llm: 60 }), 10), [
      { resource: 'llm', cap: 15, previous: undefined },
    ]);
    assert.deepEqual(
      quick.assess(reading({ llm: waitsAt(20) }, { llm: 15 }), 260),
      [{ resource: 'llm', cap: 16, previous: 15, waitMs: 20 }],
      'quick starts then raise the cap by an eighth',
    );

    const small = new UrgentWaitGuard({ targetMs: TARGET_MS });
    small.urgentWorkSeen(0, 'llm');
    assert.deepEqual(small.assess(reading({}, { llm: DEFAULT_FLOOR }), 10), []);
    assert.deepEqual(small.caps(), {});
    small.urgentWorkSeen(20, 'llm');
    small.assess(reading({}, { llm: 3 }), 30);
    assert.deepEqual(
      small.caps(),
      { llm: DEFAULT_FLOOR },
      'a quarter of 3, but never below the floor',
    );
  });

  it('reads at once for P0 work on a quiet resource at most once a reading interval', () => {
    const guard = new UrgentWaitGuard({ targetMs: TARGET_MS });
    assert.equal(guard.urgentWorkSeen(0, 'llm'), true, 'the onset: read at once');
    assert.deepEqual(guard.assess(reading({}, { llm: 1 }, { llm: 1 }), 5), [], 'no flood');
    assert.equal(guard.urgentWorkSeen(10, 'llm'), false, 'the next P0 step waits for the poll');
    assert.equal(guard.urgentWorkSeen(20, 'browser'), true, 'another resource’s onset does not');
    // The regular reading still treats the noted P0 work as an onset: a flood that came since is cut.
    assert.deepEqual(guard.assess(reading({}, { llm: 40 }), 255), [
      { resource: 'llm', cap: 10, previous: undefined },
    ]);
    // Each onset reading that finds no flood counts from its own time.
    const quiet = new UrgentWaitGuard({ targetMs: TARGET_MS });
    quiet.urgentWorkSeen(0, 'llm');
    quiet.assess(reading({}, {}), 5);
    assert.equal(quiet.urgentWorkSeen(100, 'llm'), false);
    quiet.assess(reading({}, {}), 255);
    assert.equal(quiet.urgentWorkSeen(400, 'llm'), false, 'within an interval of the last');
    quiet.assess(reading({}, {}), 450);
    assert.equal(quiet.urgentWorkSeen(700, 'llm'), true, 'an interval after it');
  });

  it('lifts an onset cap when the P0 work seen never starts', () => {
    const guard = new UrgentWaitGuard({ targetMs: TARGET_MS, releaseAfterMs: 1_000 });
    guard.urgentWorkSeen(0, 'llm');
    guard.assess(reading({}, { llm: 60 }), 10);
    assert.deepEqual(guard.assess(reading({}, { llm: 15 }), 1_009), []);
    assert.deepEqual(guard.assess(reading({}, { llm: 15 }), 1_010), [
      { resource: 'llm', cap: undefined, previous: 15 },
    ]);
  });
});
