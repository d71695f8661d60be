import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  CLOSED_BREAKER,
  DEFAULT_BREAKER,
  breakerConfigProblem,
  decide,
  fireCoolDown,
  record,
  type BreakerConfig,
  type BreakerState,
  type BreakerStatus,
} from './circuit-breaker.js';

/** 10 s window in 5 buckets, 4 calls at least, 50 %, 3 in a row, 5 s cool-down, 2 probes. */
const config: BreakerConfig = {
  windowMs: 10_000,
  bucketCount: 5,
  minCalls: 4,
  failureRate: 0.5,
  consecutiveFailures: 3,
  coolDownMs: 5_000,
  probes: 2,
  successesToClose: 2,
  probeTimeoutMs: 20_000,
};

/** `ok@t`, `fail@t`: record; `ask@t`: decide (admit or not); `fire@t`: the cool-down timer. */
type Step = string;

function run(
  steps: readonly Step[],
  cfg = config,
): { statuses: BreakerStatus[]; admits: boolean[] } {
  let state: BreakerState = CLOSED_BREAKER;
  const statuses: BreakerStatus[] = [];
  const admits: boolean[] = [];
  for (const step of steps) {
    const [op, at] = step.split('@') as [string, string];
    const atMs = Number(at);
    if (op === 'ok' || op === 'fail') state = record(state, { ok: op === 'ok', atMs }, cfg).state;
    else if (op === 'fire') state = fireCoolDown(state, atMs).state;
    else {
      const decision = decide(state, atMs, cfg);
      admits.push(decision.admit);
      state = decision.state;
    }
    statuses.push(state.status);
  }
  return { statuses, admits };
}

const last = <T>(xs: readonly T[]): T | undefined => xs[xs.length - 1];

describe('circuit breaker: sequences', () => {
  const table: Array<[string, Step[], BreakerStatus]> = [
    ['successes keep it closed', ['ok@0', 'ok@1', 'ok@2', 'ok@3', 'ok@4'], 'closed'],
    ['3 failures in a row open it', ['ok@0', 'fail@1', 'fail@2', 'fail@3'], 'open'],
    [
      '2 in a row, then a success: closed',
      ['ok@0', 'ok@1', 'ok@2', 'fail@3', 'fail@4', 'ok@5', 'fail@6'],
      'closed',
    ],
    ['50 % of 4 calls opens it', ['ok@0', 'fail@1', 'ok@2', 'fail@3'], 'open'],
    ['50 % of fewer than minCalls does not', ['ok@0', 'fail@1', 'fail@3'], 'closed'],
    [
      'failures that left the window do not count',
      ['fail@0', 'fail@1', 'ok@2', 'ok@12000', 'fail@12001', 'ok@12002'],
      'closed',
    ],
    ['failures in the window do', ['fail@0', 'fail@1', 'ok@2', 'ok@9000', 'fail@9001'], 'open'],
    [
      'open: cool-down not over, the timer changes nothing',
      ['fail@0', 'fail@1', 'fail@2', 'fire@4999'],
      'open',
    ],
    [
      'open → half-open when the timer fires',
      ['fail@0', 'fail@1', 'fail@2', 'fire@5002'],
      'half_open',
    ],
    [
      'half-open: enough probe successes close it',
      ['fail@0', 'fail@1', 'fail@2', 'fire@5002', 'ask@5003', 'ask@5004', 'ok@5100', 'ok@5200'],
      'closed',
    ],
    [
      'half-open: one success is not enough',
      ['fail@0', 'fail@1', 'fail@2', 'fire@5002', 'ask@5003', 'ok@5100'],
      'half_open',
    ],
    [
      'half-open: a failed probe reopens it',
      ['fail@0', 'fail@1', 'fail@2', 'fire@5002', 'ask@5003', 'ok@5100', 'fail@5200'],
      'open',
    ],
    [
      'outcomes recorded while open are ignored',
      ['fail@0', 'fail@1', 'fail@2', 'ok@3', 'ok@4', 'ok@5', 'fire@5002'],
      'half_open',
    ],
    [
      'decide moves it to half-open lazily',
      ['fail@0', 'fail@1', 'fail@2', 'ask@5002'],
      'half_open',
    ],
  ];
  for (const [name, steps, expected] of table) {
    it(name, () => assert.equal(last(run(steps).statuses), expected));
  }

  it('open refuses calls until the cool-down is over, then admits the probes only', () => {
    const { admits } = run([
      'fail@0',
      'fail@1',
      'fail@2',
      'ask@100',
      'ask@5001',
      'ask@5002',
      'ask@5003',
      'ask@5004',
      'ask@5005',
    ]);
    assert.deepEqual(admits, [false, false, true, true, false, false]);
  });

  it('a lost probe frees its slot after the probe timeout', () => {
    const { admits } = run([
      'fail@0',
      'fail@1',
      'fail@2',
      'ask@5002',
      'ask@5003',
      'ask@6000',
      'ask@25003',
    ]);
    assert.deepEqual(admits, [true, true, false, true]);
  });

  it('reports the transition, the reason and the due time of the cool-down', () => {
    let state = CLOSED_BREAKER;
    state = record(state, { ok: false, atMs: 0 }, config).state;
    state = record(state, { ok: false, atMs: 1 }, config).state;
    const opened = record(state, { ok: false, atMs: 2 }, config);
    assert.equal(opened.coolDownDueAtMs, 5_002);
    assert.deepEqual(opened.transition, {
      from: 'closed',
      to: 'open',
      reason: '3 consecutive failures',
    });
    const refused = decide(opened.state, 10, config);
    assert.equal(refused.retryAtMs, 5_002);
    const probing = decide(opened.state, 5_002, config);
    assert.deepEqual(probing.transition, {
      from: 'open',
      to: 'half_open',
      reason: 'cool-down over',
    });
    assert.equal(probing.probe, true);
  });

  it('a late failure admitted before the half-open period does not reopen it', () => {
    const halfOpen = decide(openedAt0(), 5_002, config).state;
    assert.equal(halfOpen.status, 'half_open');
    const late = record(halfOpen, { ok: false, atMs: 5_100, admittedAtMs: 1 }, config);
    assert.equal(late.state.status, 'half_open');
  });

  it('a late outcome does not push newer buckets out of the window', () => {
    let state = CLOSED_BREAKER;
    for (const atMs of [20_000, 20_001]) state = record(state, { ok: false, atMs }, config).state;
    state = record(state, { ok: true, atMs: 1 }, config).state;
    assert.equal(state.buckets.length, 1);
    assert.equal(state.buckets[0]?.failures, 2);
  });
});

function openedAt0(): BreakerState {
  let state = CLOSED_BREAKER;
  for (const atMs of [0, 1, 2]) state = record(state, { ok: false, atMs }, config).state;
  return state;
}

describe('circuit breaker: properties', () => {
  const anOp = fc.record({
    op: fc.constantFrom('ask', 'ok', 'fail', 'fire'),
    gapMs: fc.integer({ min: 0, max: 4_000 }),
  });

  it('never admits while open, admits at most `probes` per half-open period, stays JSON-safe', () => {
    fc.assert(
      fc.property(fc.array(anOp, { maxLength: 300 }), (ops) => {
        let state: BreakerState = CLOSED_BREAKER;
        let now = 0;
        let probesThisPeriod = 0;
        for (const { op, gapMs } of ops) {
          now += gapMs;
          const before = state.status;
          if (op === 'ask') {
            const decision = decide(state, now, config);
            if (before === 'open' && decision.state.status === 'open')
              assert.equal(decision.admit, false);
            if (decision.probe) probesThisPeriod += 1;
            state = decision.state;
          } else if (op === 'fire') {
            state = fireCoolDown(state, now).state;
          } else {
            state = record(state, { ok: op === 'ok', atMs: now }, config).state;
          }
          if (state.status !== 'half_open') probesThisPeriod = 0;
          // Gaps stay under the probe timeout, so no probe slot is ever freed early.
          assert.ok(probesThisPeriod <= config.probes, `${probesThisPeriod} probes`);
          assert.deepEqual(JSON.parse(JSON.stringify(state)), state);
          if (state.status === 'open') assert.ok(state.coolDownUntilMs !== null);
        }
      }),
    );
  });
});

describe('breakerConfigProblem', () => {
  it('accepts the defaults', () => assert.equal(breakerConfigProblem(DEFAULT_BREAKER), undefined));
  const bad: Array<[string, Partial<BreakerConfig>]> = [
    ['failureRate 0', { failureRate: 0 }],
    ['no probes', { probes: 0 }],
    ['more successes than probes', { probes: 2, successesToClose: 3 }],
    ['no buckets', { bucketCount: 0 }],
  ];
  for (const [name, change] of bad) {
    it(`rejects ${name}`, () =>
      assert.equal(typeof breakerConfigProblem({ ...DEFAULT_BREAKER, ...change }), 'string'));
  }
});
