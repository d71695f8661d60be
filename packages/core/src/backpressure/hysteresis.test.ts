import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  hysteresisProblem,
  initialLevel,
  nextLevel,
  severityOf,
  worstLevel,
  type HysteresisConfig,
  type LevelState,
  type PressureLevel,
} from './hysteresis.js';

/** A busy ratio: throttle from 70 %, degrade from 80 % … reject from 95 %. */
const config: HysteresisConfig = {
  thresholds: [
    { level: 'throttle', enterAt: 0.7, exitAt: 0.6, minDwellMs: 10_000 },
    { level: 'degrade', enterAt: 0.8, exitAt: 0.7, minDwellMs: 10_000 },
    { level: 'hold_p3', enterAt: 0.85, exitAt: 0.75, minDwellMs: 10_000 },
    { level: 'hold_p2', enterAt: 0.9, exitAt: 0.8, minDwellMs: 10_000 },
    { level: 'reject', enterAt: 0.95, exitAt: 0.85, minDwellMs: 30_000 },
  ],
};

/** Readings as [atMs, value]; the levels after each. */
function levels(readings: ReadonlyArray<readonly [number, number]>, cfg = config): PressureLevel[] {
  let state = initialLevel(0);
  return readings.map(([atMs, value]) => {
    state = nextLevel(state, value, atMs, cfg);
    return state.level;
  });
}

/** How often the level changed along readings. */
function changes(readings: ReadonlyArray<readonly [number, number]>, cfg = config): number {
  const seen = levels(readings, cfg);
  return seen.filter((level, i) => level !== (i === 0 ? 'normal' : seen[i - 1])).length;
}

describe('hysteresis: sequences', () => {
  const table: Array<[string, Array<[number, number]>, PressureLevel[]]> = [
    [
      'quiet stays normal',
      [
        [0, 0.1],
        [1_000, 0.69],
      ],
      ['normal', 'normal'],
    ],
    ['enters at the threshold', [[0, 0.7]], ['throttle']],
    [
      'escalates at once, skipping levels',
      [
        [0, 0.5],
        [1, 0.96],
      ],
      ['normal', 'reject'],
    ],
    [
      'inside the band it stays, however long',
      [
        [0, 0.72],
        [60_000, 0.61],
        [120_000, 0.65],
      ],
      ['throttle', 'throttle', 'throttle'],
    ],
    [
      'below exit but within the dwell: stays',
      [
        [0, 0.72],
        [9_999, 0.1],
      ],
      ['throttle', 'throttle'],
    ],
    [
      'below exit after the dwell: leaves',
      [
        [0, 0.72],
        [10_000, 0.1],
      ],
      ['throttle', 'normal'],
    ],
    [
      'steps down to the band it is in',
      [
        [0, 0.96],
        [30_000, 0.65],
      ],
      ['reject', 'throttle'],
    ],
    [
      'coming down, a level is kept while above its exit (0.78 is in hold_p3’s band)',
      [
        [0, 0.96],
        [30_000, 0.78],
      ],
      ['reject', 'hold_p3'],
    ],
    [
      'each level down waits its own dwell',
      [
        [0, 0.96],
        [30_000, 0.78],
        [35_000, 0.1],
        [40_000, 0.1],
      ],
      ['reject', 'hold_p3', 'hold_p3', 'normal'],
    ],
    [
      'escalation does not wait for the dwell',
      [
        [0, 0.72],
        [1, 0.81],
        [2, 0.9],
      ],
      ['throttle', 'degrade', 'hold_p2'],
    ],
    [
      'a NaN reading changes nothing',
      [
        [0, 0.72],
        [20_000, Number.NaN],
      ],
      ['throttle', 'throttle'],
    ],
  ];
  for (const [name, readings, expected] of table) {
    it(name, () => assert.deepEqual(levels(readings), expected));
  }

  it('a level the configuration no longer has is left at once', () => {
    const state: LevelState = { level: 'reject', sinceMs: 0 };
    const onlyThrottle: HysteresisConfig = { thresholds: [config.thresholds[0]!] };
    assert.equal(nextLevel(state, 0.65, 1, onlyThrottle).level, 'throttle');
  });
});

describe('hysteresis: properties', () => {
  const aTime = fc.integer({ min: 1, max: 3_000 });

  it('a signal oscillating inside a band never changes the level once entered', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(aTime, fc.double({ min: 0.6, max: 0.6999, noNaN: true })), {
          maxLength: 200,
        }),
        (steps) => {
          let now = 0;
          const readings: Array<[number, number]> = [[0, 0.7]];
          for (const [gap, value] of steps) readings.push([(now += gap), value]);
          assert.equal(changes(readings), 1);
        },
      ),
    );
  });

  it('a signal oscillating across a band changes the level at most twice per dwell', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(aTime, fc.boolean()), { minLength: 1, maxLength: 300 }),
        (steps) => {
          let now = 0;
          const readings = steps.map(([gap, high]): [number, number] => [
            (now += gap),
            high ? 0.71 : 0.59,
          ]);
          const span = now - (readings[0]?.[0] ?? 0);
          const bound = 2 * Math.floor(span / 10_000) + 1;
          const seen = changes(readings);
          assert.ok(seen <= bound, `${seen} changes over ${span} ms`);
        },
      ),
    );
  });

  it('without hysteresis and dwell the same oscillation flaps (the bound can fail)', () => {
    const flat: HysteresisConfig = {
      thresholds: [{ level: 'throttle', enterAt: 0.7, exitAt: 0.7, minDwellMs: 0 }],
    };
    const readings = Array.from({ length: 100 }, (_, i): [number, number] => [
      i * 100,
      i % 2 === 0 ? 0.71 : 0.69,
    ]);
    assert.equal(changes(readings, flat), 100);
    assert.ok(changes(readings) <= 1);
  });

  it('any signal: every step down comes at least a dwell after the previous change', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(aTime, fc.double({ min: 0, max: 1, noNaN: true })), { maxLength: 300 }),
        (steps) => {
          let state = initialLevel(0);
          let now = 0;
          for (const [gap, value] of steps) {
            now += gap;
            const next = nextLevel(state, value, now, config);
            if (severityOf(next.level) < severityOf(state.level)) {
              const dwell = config.thresholds.find((t) => t.level === state.level)?.minDwellMs ?? 0;
              assert.ok(now - state.sinceMs >= dwell);
            }
            if (next.level !== state.level) assert.equal(next.sinceMs, now);
            state = next;
          }
        },
      ),
    );
  });
});

describe('worstLevel', () => {
  it('takes the worst level and names every signal at it', () => {
    const combined = worstLevel([
      { signal: 'queue_depth', level: 'throttle', value: 900 },
      { signal: 'llm_rate_limit', level: 'hold_p3', value: 0.4 },
      { signal: 'retry_storm', level: 'hold_p3', value: 0.3 },
      { signal: 'db_connection_usage', level: 'normal', value: 0.2 },
    ]);
    assert.equal(combined.level, 'hold_p3');
    assert.deepEqual(
      combined.causes.map((cause) => cause.signal),
      ['llm_rate_limit', 'retry_storm'],
    );
  });

  it('normal has no causes', () => {
    assert.deepEqual(worstLevel([{ signal: 'queue_depth', level: 'normal', value: 1 }]), {
      level: 'normal',
      causes: [],
    });
    assert.deepEqual(worstLevel([]), { level: 'normal', causes: [] });
  });
});

describe('hysteresisProblem', () => {
  it('accepts the test configuration', () => assert.equal(hysteresisProblem(config), undefined));
  const t = config.thresholds;
  const bad: Array<[string, HysteresisConfig]> = [
    ['exit above enter', { thresholds: [{ ...t[0]!, exitAt: 0.8 }] }],
    ['levels out of order', { thresholds: [t[1]!, t[0]!] }],
    ['enter not rising', { thresholds: [t[0]!, { ...t[1]!, enterAt: 0.7 }] }],
    ['negative dwell', { thresholds: [{ ...t[0]!, minDwellMs: -1 }] }],
  ];
  for (const [name, cfg] of bad) {
    it(`rejects ${name}`, () => assert.equal(typeof hysteresisProblem(cfg), 'string'));
  }
});
